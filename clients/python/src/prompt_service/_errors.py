"""The one error type of the client, with the service's code and request id."""

from __future__ import annotations

from typing import Any, Dict, Optional

# What an answer without the service's error body means (a proxy's 502, say).
_STATUS_CODES: Dict[int, str] = {
    400: "VALIDATION_ERROR",
    401: "INVALID_CREDENTIALS",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "RATE_LIMITED",
    502: "SERVICE_UNAVAILABLE",
    503: "SERVICE_UNAVAILABLE",
    504: "UPSTREAM_TIMEOUT",
}


def code_for_status(status: int) -> str:
    """A code for an answer that carries no error body."""
    return _STATUS_CODES.get(status, "INTERNAL_ERROR" if status >= 500 else "VALIDATION_ERROR")


class PromptServiceError(Exception):
    """Every failure the client reports.

    ``code`` is the service's code (the closed list of the service's errors) when it answered,
    or ``NETWORK_ERROR`` / ``TIMEOUT`` (with ``status`` 0) when it could not be reached: branch
    on it rather than on the message.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: Any = None,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
        operation: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.request_id = request_id
        #: Seconds the service asked to wait (Retry-After), when it did.
        self.retry_after = retry_after
        self.operation = operation

    @property
    def is_unavailable(self) -> bool:
        """The service could not be reached or failed on its side: a cached or fallback value may stand in."""
        return self.status == 0 or self.status >= 500 or self.status == 429

    def __str__(self) -> str:
        request = f" (request {self.request_id})" if self.request_id else ""
        return f"{self.code}: {self.message}{request}"

    def __repr__(self) -> str:
        return (
            f"PromptServiceError(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r}, request_id={self.request_id!r})"
        )
