"""The transport, the renderer and the cache without the service: tiny local HTTP servers.

    cd clients/python && PYTHONPATH=src python3 -m unittest tests.test_offline
"""

from __future__ import annotations

import http.server
import json
import socketserver
import threading
import time
import unittest
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from prompt_service import Clock, FallbackTemplate, PromptClient, PromptServiceError
from prompt_service._cache import RefreshPool, TtlCache
from prompt_service._template import Renderable, format_value

# Cases a reviewer ran through the service and the TypeScript client, with their answers.
JS_CASES = Path(__file__).resolve().parent / "js_render_cases.json"

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


@contextmanager
def serve(handle: Handler) -> Iterator[Tuple[str, List[Dict[str, Optional[str]]]]]:
    """A local server answering every request with ``handle``; yields its URL and the requests seen."""
    seen: List[Dict[str, Optional[str]]] = []

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _any(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            seen.append({"path": self.path, "authorization": self.headers.get("authorization")})
            try:
                handle(self)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up

        do_GET = do_POST = _any

    server = _Server(("127.0.0.1", 0), H)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def send(h: http.server.BaseHTTPRequestHandler, status: int, body: bytes, **headers: str) -> None:
    h.send_response(status)
    h.send_header("content-length", str(len(body)))
    for name, value in headers.items():
        h.send_header(name.replace("_", "-"), value)
    h.end_headers()
    h.wfile.write(body)


def no_sleep_clock() -> Clock:
    return Clock(sleep=lambda _s: None)


class Transport(unittest.TestCase):
    def test_the_token_does_not_follow_a_redirect_to_another_origin(self) -> None:
        with serve(lambda h: send(h, 200, b'{"data":{"_id":"x"}}')) as (other, other_seen):

            def redirect(h: http.server.BaseHTTPRequestHandler) -> None:
                target = f"{other}/steal" if h.path.startswith("/api/v1/prompts/away") else "/api/v1/prompts/here"
                if h.path.startswith("/api/v1/prompts/ftp"):
                    target = "ftp://127.0.0.1:1/x"
                if h.path.startswith("/api/v1/prompts/here"):
                    send(h, 200, b'{"data":{"_id":"here"}}')
                else:
                    send(h, 302, b"", location=target)

            with serve(redirect) as (base, seen):
                client = PromptClient(base, api_key="pk_SECRET", retries=0)
                self.assertEqual(client.get("away", cache=False).prompt, {"_id": "x"})
                self.assertEqual([r["authorization"] for r in other_seen], [None])
                # The same origin keeps it.
                self.assertEqual(client.get("stay", cache=False).prompt, {"_id": "here"})
                self.assertEqual(seen[-1]["authorization"], "Bearer pk_SECRET")
                # As fetch: a redirect goes to HTTP(S) only (urllib would follow one to ftp).
                with self.assertRaises(PromptServiceError) as raised:
                    client.get("ftp", cache=False)
                self.assertEqual(raised.exception.code, "NETWORK_ERROR")
                self.assertIn("not an HTTP(S) address", str(raised.exception))

    def test_the_timeout_bounds_the_whole_attempt(self) -> None:
        def trickle(h: http.server.BaseHTTPRequestHandler) -> None:
            h.send_response(200)
            h.send_header("content-length", "100")
            h.end_headers()
            for _ in range(40):  # 4 s of a byte every 0.1 s: no single read waits 0.5 s
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.1)

        with serve(trickle) as (base, _seen):
            client = PromptClient(base, api_key="pk", retries=0, timeout=0.5)
            started = time.monotonic()
            with self.assertRaises(PromptServiceError) as raised:
                client.get("p", cache=False)
            self.assertEqual((raised.exception.status, raised.exception.code), (0, "TIMEOUT"))
            self.assertLess(time.monotonic() - started, 2.5)

    def test_a_body_cut_short_is_a_network_error_retried_then_the_fallback(self) -> None:
        def cut(h: http.server.BaseHTTPRequestHandler) -> None:
            h.send_response(200)
            h.send_header("content-length", "100")
            h.end_headers()
            h.wfile.write(b'{"data":')
            h.wfile.flush()
            h.close_connection = True

        with serve(cut) as (base, seen):
            client = PromptClient(base, api_key="pk", retries=2, clock=no_sleep_clock())
            with self.assertRaises(PromptServiceError) as raised:
                client.get("p", cache=False)
            self.assertEqual((raised.exception.status, raised.exception.code), (0, "NETWORK_ERROR"))
            self.assertEqual(len(seen), 3)
            fallback = PromptClient(base, api_key="pk", retries=0, fallback_templates={"p": "Hi {{x}}"})
            out = fallback.invoke("p", {"x": 1})
            self.assertEqual((out.rendered_content, out.source), ("Hi 1", "fallback"))

    def test_a_2xx_that_is_not_json_is_no_answer(self) -> None:
        with serve(lambda h: send(h, 200, b"<html>captive</html>", content_type="text/html")) as (base, seen):
            client = PromptClient(base, api_key="pk", retries=1, clock=no_sleep_clock())
            with self.assertRaises(PromptServiceError) as raised:
                client.get("p", cache=False)
            self.assertEqual((raised.exception.status, raised.exception.code), (0, "NETWORK_ERROR"))
            self.assertEqual(len(seen), 2)
            fallback = PromptClient(base, api_key="pk", retries=0, fallback_templates={"p": "F"})
            self.assertEqual(fallback.invoke("p").source, "fallback")

    def test_a_stale_entry_stands_in_when_the_body_is_cut(self) -> None:
        now = [0.0]
        broken = [False]

        def answer(h: http.server.BaseHTTPRequestHandler) -> None:
            if not broken[0]:
                send(h, 200, b'{"data":{"renderedContent":"ok","variables":{}}}')
                return
            h.send_response(200)
            h.send_header("content-length", "100")
            h.end_headers()
            h.wfile.write(b"{")
            h.close_connection = True

        with serve(answer) as (base, _seen):
            client = PromptClient(
                base,
                api_key="pk",
                retries=0,
                cache_ttl=10,
                stale_while_revalidate=False,
                clock=Clock(now=lambda: now[0], sleep=lambda _s: None),
            )
            self.assertEqual(client.invoke("p").source, "network")
            broken[0], now[0] = True, 20.0
            out = client.invoke("p")
            self.assertEqual((out.rendered_content, out.source), ("ok", "stale"))


class JavaScriptValues(unittest.TestCase):
    """Values are written as the service (JavaScript) writes them."""

    def test_the_reviewer_s_cases_as_the_service_renders_them(self) -> None:
        for case in json.loads(JS_CASES.read_text(encoding="utf-8")):
            with self.subTest(case["name"]):
                renderable = Renderable(
                    case.get("template", ""),
                    case["variables"],
                    case.get("messages"),
                    max_output_bytes=case.get("maxOutputBytes", 1024 * 1024),
                )
                try:
                    got: Dict[str, Any] = {"ok": renderable.render(json.loads(case["valuesJson"]))}
                except PromptServiceError as error:
                    got = {"err": error.code, "details": error.details}
                self.assertEqual(got, case["expected"])

    def test_numbers_as_number_to_string(self) -> None:
        # Answers of node's String(n).
        expected = {
            2**53 + 1: "9007199254740992",
            10**30: "1e+30",
            10**400: "Infinity",
            -(10**400): "-Infinity",
            2**63: "9223372036854776000",
            12345678901234567890123: "1.2345678901234568e+22",
            2.0**60: "1152921504606847000",
            1e21 - 131072: "999999999999999900000",
            2**70: "1.1805916207174113e+21",
            -0.0: "0",
            1e-7: "1e-7",
            0.000001234: "0.000001234",
            123e-20: "1.23e-18",
            5e-324: "5e-324",
            1.7976931348623157e308: "1.7976931348623157e+308",
            100.0: "100",
            -1.5: "-1.5",
        }
        for value, text in expected.items():
            with self.subTest(value):
                self.assertEqual(format_value(value), text)

    def test_json_of_objects_keys_and_strings(self) -> None:
        self.assertEqual(
            format_value({"b": 1, "10": 2, "2": 3, "01": 4, "4294967295": 5}),
            '{"2":3,"10":2,"b":1,"01":4,"4294967295":5}',
        )
        # A surrogate pair is a character; a lone one is escaped.
        self.assertEqual(format_value(["\ud83d\ude00", "\udc00", "a\ud800"]), '["\ud83d\ude00","\\udc00","a\\ud800"]')


class ChatSteps(unittest.TestCase):
    def test_the_step_budget_is_shared_by_all_messages(self) -> None:
        loop = {"role": "user", "content": "{{#each xs}}{{#each xs}}{{/each}}{{/each}}"}
        xs = [0] * 30
        # One message alone fits in 1,000 steps; the two together do not (as renderChat).
        Renderable("", [], [loop], max_steps=1_000).render({"xs": xs})
        with self.assertRaises(PromptServiceError) as raised:
            Renderable("", [], [loop, loop], max_steps=1_000).render({"xs": xs})
        self.assertEqual(raised.exception.code, "RENDER_TOO_LARGE")


class Fallbacks(unittest.TestCase):
    def test_an_undeclared_placeholder_of_a_fallback_with_variables_is_required(self) -> None:
        template = FallbackTemplate("Hi {{name}} from {{team}}{{#if vip}}!{{/if}}", [{"name": "name"}])
        client = PromptClient("http://127.0.0.1:1", api_key="pk", retries=0, fallback_templates={"p": template})
        with self.assertRaises(PromptServiceError) as raised:
            client.invoke("p", {"name": "Ada"})
        self.assertEqual(
            (raised.exception.code, raised.exception.details), ("MISSING_REQUIRED_VARIABLES", ["team", "vip"])
        )
        renderable = client.get_renderable("p")
        self.assertEqual([v["name"] for v in renderable.variables if v["required"]], ["name", "team", "vip"])
        with self.assertRaises(PromptServiceError):
            renderable.render({"name": "Ada"})
        out = client.invoke("p", {"name": "Ada", "team": "Core", "vip": True})
        self.assertEqual(out.rendered_content, "Hi Ada from Core!")
        # Without declared variables every placeholder stays optional.
        loose = PromptClient("http://127.0.0.1:1", api_key="pk", retries=0, fallback_templates={"p": "Hi {{name}}"})
        self.assertEqual(loose.invoke("p").rendered_content, "Hi ")
        self.assertEqual(loose.get_renderable("p").render({}).rendered_content, "Hi ")


class BackgroundRefreshes(unittest.TestCase):
    def test_a_burst_of_stale_keys_runs_on_a_bounded_pool(self) -> None:
        cache: TtlCache[int] = TtlCache(0, None, 1000, time.monotonic, RefreshPool(3))
        release = threading.Event()
        ran: List[str] = []
        lock = threading.Lock()

        def refresh(key: str) -> Callable[[], None]:
            def run() -> None:
                release.wait(10)
                with lock:
                    ran.append(key)

            return run

        def refresh_threads() -> int:
            return sum(1 for t in threading.enumerate() if t.name == "prompt-service-refresh")

        before = refresh_threads()
        for i in range(200):
            cache.revalidate(f"k{i}", refresh(f"k{i}"))
        self.assertLessEqual(refresh_threads() - before, 3)
        release.set()
        cache.settled(10)
        self.assertEqual(len(ran), 200)
        deadline = time.monotonic() + 5
        while refresh_threads() > before and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(refresh_threads(), before)  # the workers end with the queue


if __name__ == "__main__":
    unittest.main()
