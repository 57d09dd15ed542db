"""One HTTP exchange per attempt (urllib from the standard library), retried per the options."""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ._errors import PromptServiceError, code_for_status


@dataclass(frozen=True)
class RetryOptions:
    """Retries on 429 and 5xx. Delays are in seconds."""

    #: Retries after the first attempt (0 turns retrying off).
    retries: int = 3
    #: First backoff step; each further retry doubles it, with jitter.
    base_delay: float = 0.25
    #: Ceiling of one backoff step.
    max_delay: float = 8.0
    #: The longest Retry-After the client waits for. When the service asks for more, the client
    #: does not retry early: it fails at once, and the error's ``retry_after`` says how long.
    max_retry_after: float = 30.0


@dataclass(frozen=True)
class RetryInfo:
    operation: str
    #: 1 for the first retry.
    attempt: int
    delay: float
    error: PromptServiceError


def backoff_delay(attempt: int, retry: RetryOptions, rand: Callable[[], float]) -> float:
    """Exponential backoff with "equal jitter": half the step fixed, half random."""
    step = min(retry.max_delay, retry.base_delay * 2.0 ** (attempt - 1))
    return step / 2 + rand() * (step / 2)


def parse_retry_after(value: Optional[str], now: float) -> Optional[float]:
    """Retry-After as delta-seconds or an HTTP date, in seconds; None when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        at = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if at is None:
        return None
    return max(0.0, at.timestamp() - now)


@dataclass
class Route:
    operation: str
    method: str
    path: str
    #: Sent again after a 5xx or a network error (GET, and the render POSTs that change nothing).
    retry_safe: bool
    #: Acts in "the current workspace": a user token names it with ?organizationId=.
    workspace: bool = True
    public: bool = False


class Transport:
    def __init__(
        self,
        base_url: str,
        credential: Callable[[], Optional[Tuple[str, str]]],
        organization_id: Callable[[], Optional[str]],
        retry: RetryOptions,
        timeout: float,
        sleep: Callable[[float], None],
        rand: Callable[[], float],
        wall_clock: Callable[[], float],
        on_retry: Optional[Callable[[RetryInfo], None]],
        user_agent: str,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._credential = credential
        self._organization_id = organization_id
        self._retry = retry
        self._timeout = timeout
        self._sleep = sleep
        self._rand = rand
        self._wall_clock = wall_clock
        self._on_retry = on_retry
        self._user_agent = user_agent

    def call(
        self,
        route: Route,
        params: Optional[Mapping[str, str]] = None,
        query: Optional[Mapping[str, Any]] = None,
        body: Any = None,
    ) -> Any:
        path = route.path
        for name, value in (params or {}).items():
            if not value:
                raise ValueError(f"{route.operation}: {name} is required")
            path = path.replace(f":{name}", urllib.parse.quote(str(value), safe=""))
        credential = None if route.public else self._credential()
        fields: Dict[str, str] = {}
        for name, value in (query or {}).items():
            if value is not None:
                fields[name] = str(value).lower() if isinstance(value, bool) else str(value)
        org = self._organization_id()
        if credential and credential[1] == "user" and org and route.workspace and "organizationId" not in fields:
            fields["organizationId"] = org
        url = f"{self._base}{path}"
        if fields:
            url += "?" + urllib.parse.urlencode(fields)
        headers = {"accept": "application/json", "user-agent": self._user_agent}
        if credential:
            headers["authorization"] = f"Bearer {credential[0]}"
        data: Optional[bytes] = None
        if body is not None or route.method == "POST":
            data = json.dumps({} if body is None else body).encode("utf-8")
            headers["content-type"] = "application/json"

        attempt = 0
        while True:
            try:
                return self._once(route, url, headers, data)
            except PromptServiceError as error:
                retryable = error.status == 429 or (
                    (error.status == 0 or error.status >= 500) and route.retry_safe
                )
                if attempt >= self._retry.retries or not retryable:
                    raise
                attempt += 1
                delay = backoff_delay(attempt, self._retry, self._rand)
                if error.retry_after is not None:
                    if error.retry_after > self._retry.max_retry_after:
                        raise
                    delay = error.retry_after
                if self._on_retry:
                    self._on_retry(RetryInfo(route.operation, attempt, delay, error))
                self._sleep(delay)

    def _once(self, route: Route, url: str, headers: Dict[str, str], data: Optional[bytes]) -> Any:
        request = urllib.request.Request(url, data=data, headers=headers, method=route.method)
        where = f"{route.method} {url.split('?', 1)[0]}"
        # One deadline for the whole attempt (connect, redirects, headers, body): the socket's
        # timeout alone is per operation, and a server trickling a byte now and then would hold
        # the call for ever. At the deadline the watchdog shuts the connection down.
        attempt = _Attempt(self._timeout)
        opener = urllib.request.build_opener(
            _SameOriginAuthRedirect(), _HttpHandler(attempt), _HttpsHandler(attempt)
        )
        try:
            try:
                with opener.open(request, timeout=self._timeout) as response:
                    status = response.status
                    raw_body = response.read()
            except urllib.error.HTTPError as http_error:
                with http_error:
                    try:
                        raw = http_error.read().decode("utf-8", errors="replace")
                    except (OSError, http.client.HTTPException):
                        raw = ""  # as the TypeScript client: the status still says what happened
                    raise self._error(route, http_error.code, http_error.headers, raw) from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as network_error:
                # HTTPException: a body cut short (IncompleteRead), a status line that is not HTTP.
                reason = getattr(network_error, "reason", network_error)
                if attempt.expired or isinstance(reason, (socket.timeout, TimeoutError)):
                    raise PromptServiceError(
                        0,
                        "TIMEOUT",
                        f"{route.operation}: no answer from {where} within {self._timeout} s",
                        operation=route.operation,
                    ) from network_error
                raise PromptServiceError(
                    0,
                    "NETWORK_ERROR",
                    f"{route.operation}: the service cannot be reached at {where} ({reason})",
                    operation=route.operation,
                ) from network_error
        finally:
            attempt.close()
        if status == 204 or not raw_body:
            return None
        try:
            parsed = json.loads(raw_body.decode("utf-8"))
        except ValueError as bad_answer:
            # A 2xx that is not JSON is not the service's answer (a captive portal, a proxy's
            # page): no usable answer, as when it cannot be reached (retried, fallback, stale).
            raise PromptServiceError(
                0,
                "NETWORK_ERROR",
                f"{route.operation}: the answer from {where} (HTTP {status}) is not JSON",
                operation=route.operation,
            ) from bad_answer
        return parsed.get("data") if isinstance(parsed, dict) else parsed

    def _error(self, route: Route, status: int, headers: Any, raw: str) -> PromptServiceError:
        body: Dict[str, Any] = {}
        try:
            parsed = json.loads(raw) if raw else None
            if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
                body = parsed["error"]
        except ValueError:
            pass
        request_id = body.get("requestId") if isinstance(body.get("requestId"), str) else None
        return PromptServiceError(
            status,
            body["code"] if isinstance(body.get("code"), str) else code_for_status(status),
            body["message"] if isinstance(body.get("message"), str) else f"{route.operation} failed with HTTP {status}",
            details=body.get("details"),
            request_id=request_id or headers.get("x-request-id"),
            retry_after=parse_retry_after(headers.get("retry-after"), self._wall_clock()),
            operation=route.operation,
        )


class _Attempt:
    """One attempt's deadline: a timer shuts its connections down when it passes."""

    def __init__(self, timeout: float) -> None:
        self.expired = False
        self._sockets: List[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def register(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def close(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    # socket.socket's own shutdown, also for an SSLSocket (its override drops the TLS state
    # under the reading thread's feet): the blocked read returns at once.
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


class _HttpConnection(http.client.HTTPConnection):
    attempt: Optional[_Attempt] = None

    def connect(self) -> None:
        super().connect()
        if self.attempt is not None:
            self.attempt.register(self.sock)


class _HttpsConnection(http.client.HTTPSConnection):
    attempt: Optional[_Attempt] = None

    def connect(self) -> None:
        # After the TLS handshake (bounded by the socket's timeout): the socket to shut is the TLS one.
        super().connect()
        if self.attempt is not None:
            self.attempt.register(self.sock)


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, attempt: _Attempt) -> None:
        super().__init__()
        self._attempt = attempt

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def connection(host: str, **options: Any) -> http.client.HTTPConnection:
            conn = _HttpConnection(host, **options)
            conn.attempt = self._attempt
            return conn

        return self.do_open(connection, req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, attempt: _Attempt) -> None:
        super().__init__()
        self._attempt = attempt

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def connection(host: str, **options: Any) -> http.client.HTTPSConnection:
            conn = _HttpsConnection(host, **options)
            conn.attempt = self._attempt
            return conn

        # No context: http.client's default one, as urllib's own handler without one.
        return self.do_open(connection, req)


class _SameOriginAuthRedirect(urllib.request.HTTPRedirectHandler):
    """Follows redirects, but the credential goes to the origin it was given for only: urllib
    copies every header to the new address, where fetch (the TypeScript client) drops
    Authorization once the origin changes."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Optional[urllib.request.Request]:
        if urllib.parse.urlsplit(newurl).scheme.lower() not in ("http", "https"):
            # urllib would follow one to ftp: as fetch, a redirect goes to HTTP(S) only.
            raise urllib.error.URLError(f"a redirect to {newurl.split('?', 1)[0]}, not an HTTP(S) address")
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            new.remove_header("Authorization")
            new.unredirected_hdrs.pop("Authorization", None)
        return new


def _origin(url: str) -> Tuple[str, str, int]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def default_sleep(seconds: float) -> None:
    time.sleep(seconds)


def default_random() -> float:
    return random.random()
