"""The Python client against the embedded default, started by these tests (one per run).

    cd clients/python && PYTHONPATH=src python3 -m unittest discover -s tests -t .
"""

from __future__ import annotations

import os
import threading
import time
import unittest
from typing import Any, Dict, List

from prompt_service import (
    FallbackTemplate,
    PromptClient,
    PromptServiceError,
    RetryInfo,
    RetryOptions,
    parse_retry_after,
)
from prompt_service._cache import TtlCache
from prompt_service._template import render

from .stack import ADMIN, Stack


STACK = Stack()


def setUpModule() -> None:  # noqa: N802 - unittest's name
    STACK.start()


def tearDownModule() -> None:  # noqa: N802 - unittest's name
    STACK.close()


class Service(unittest.TestCase):
    stack: Stack
    admin: PromptClient
    key: str
    org: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.stack = STACK
        cls.admin = PromptClient(cls.stack.url, retries=0)
        session = cls.admin.login(ADMIN["email"], ADMIN["password"])
        cls.org = session["organizationId"]
        created = cls.admin.request(
            "POST",
            f"/api/v1/organizations/{cls.org}/api-keys",
            body={"name": "python", "scopes": ["prompts:read", "prompts:write"]},
        )
        cls.key = created["key"]

    def client(self, **options: Any) -> PromptClient:
        return PromptClient(self.stack.url, api_key=self.key, **options)

    def published(self, name: str, template: str) -> Dict[str, Any]:
        """A prompt made with the key and published with the user token."""
        prompt: Dict[str, Any] = self.client().request("POST", "/api/v1/prompts", body={"name": name, "template": template})
        self.admin.publish(prompt["_id"], "first")
        return prompt

    def republish(self, prompt_id: str, template: str) -> None:
        self.admin.request("PATCH", f"/api/v1/prompts/{prompt_id}", body={"template": template})
        self.admin.publish(prompt_id)


class InvokeAndCache(Service):
    def test_network_then_cache_hit(self) -> None:
        prompt = self.published("Cache hit", "Hello {{ name }}!")
        client = self.client(cache_ttl=60)
        first = client.invoke(prompt["_id"], {"name": "Ada"})
        self.assertEqual((first.rendered_content, first.version, first.source), ("Hello Ada!", 1, "network"))
        self.assertEqual(first.prompt_id, prompt["_id"])
        self.republish(prompt["_id"], "Goodbye {{ name }}!")
        # Within the TTL the memory answers: the service's version 2 is not seen yet.
        hit = client.invoke(prompt["_id"], {"name": "Ada"})
        self.assertEqual((hit.rendered_content, hit.source), ("Hello Ada!", "cache"))
        # Other variables are another entry; cache=False always asks.
        self.assertEqual(client.invoke(prompt["_id"], {"name": "Bo"}).rendered_content, "Goodbye Bo!")
        fresh = client.invoke(prompt["_id"], {"name": "Ada"}, cache=False)
        self.assertEqual((fresh.rendered_content, fresh.version, fresh.source), ("Goodbye Ada!", 2, "network"))
        pinned = client.invoke(prompt["_id"], {"name": "Ada"}, version=1)
        self.assertEqual((pinned.rendered_content, pinned.version), ("Hello Ada!", 1))

    def test_stale_while_the_stack_is_stopped_refreshed_when_it_returns(self) -> None:
        prompt = self.published("Stale", "Version one for {{ who }}")
        unused = self.published("Fallback only", "Service text {{ who }}")
        background: List[BaseException] = []
        client = self.client(
            cache_ttl=0.2,
            retries=RetryOptions(retries=1, base_delay=0.01, max_delay=0.02),
            timeout=2,
            fallback_templates={unused["_id"]: "Fallback for {{who}}"},
            on_background_error=background.append,
        )
        self.assertEqual(client.invoke(prompt["_id"], {"who": "me"}).source, "network")

        self.stack.stop()
        try:
            time.sleep(0.3)
            stale = client.invoke(prompt["_id"], {"who": "me"})
            self.assertEqual((stale.rendered_content, stale.source), ("Version one for me", "stale"))
            client.settled(10)
            self.assertTrue(background, "the failed background refresh is reported")
            self.assertIsInstance(background[-1], PromptServiceError)
            self.assertEqual(getattr(background[-1], "code", None), "NETWORK_ERROR")
            self.assertIn(f"at POST {self.stack.url}/api/v1/prompts/", str(background[-1]))
            # Still stale (kept while the service is down), however often asked.
            self.assertEqual(client.invoke(prompt["_id"], {"who": "me"}).source, "stale")
            client.settled(10)

            # Nothing cached for this one: its fallback template is rendered locally.
            fallback = client.invoke(unused["_id"], {"who": "you"})
            self.assertEqual((fallback.rendered_content, fallback.source, fallback.version), ("Fallback for you", "fallback", None))
            # Without a fallback and nothing cached, the error is raised with its code.
            with self.assertRaises(PromptServiceError) as raised:
                client.invoke(prompt["_id"], {"who": "someone else"})
            self.assertEqual((raised.exception.code, raised.exception.status), ("NETWORK_ERROR", 0))
        finally:
            self.stack.start()

        self.republish(prompt["_id"], "Version two for {{ who }}")
        # Back: the stale value is served at once and refreshed in the background...
        self.assertEqual(client.invoke(prompt["_id"], {"who": "me"}).rendered_content, "Version one for me")
        client.settled(10)
        # ...so the next call has the new version from memory.
        time.sleep(0)
        refreshed = client.invoke(prompt["_id"], {"who": "me"})
        self.assertEqual(refreshed.rendered_content, "Version two for me")
        self.assertIn(refreshed.source, ("cache", "stale"))
        self.assertEqual(refreshed.version, 2)

    def test_a_4xx_drops_the_entry_and_is_raised(self) -> None:
        prompt = self.published("Deleted", "Bye {{x}}")
        client = self.client(cache_ttl=0, fallback_templates={prompt["_id"]: "local"})
        self.assertEqual(client.invoke(prompt["_id"], {"x": "1"}).source, "network")
        self.admin.request("DELETE", f"/api/v1/prompts/{prompt['_id']}")
        # Stale-while-revalidate answers once more, and the background refresh learns of the 404.
        self.assertEqual(client.invoke(prompt["_id"], {"x": "1"}).source, "stale")
        client.settled(10)
        with self.assertRaises(PromptServiceError) as raised:
            client.invoke(prompt["_id"], {"x": "1"})
        # Authoritative: no fallback for a prompt the service says is gone.
        self.assertEqual(raised.exception.code, "NOT_FOUND")

    def test_thread_safe(self) -> None:
        prompt = self.published("Threads", "n={{ n }}")
        client = self.client(cache_ttl=0.05)
        errors: List[BaseException] = []
        results: List[str] = []
        lock = threading.Lock()

        def work(worker: int) -> None:
            try:
                for i in range(10):
                    n = (worker + i) % 3
                    text = client.invoke(prompt["_id"], {"n": n}).rendered_content
                    with lock:
                        results.append(f"{n}:{text}")
            except BaseException as error:  # noqa: BLE001
                with lock:
                    errors.append(error)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        client.settled(10)
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 80)
        for line in results:
            n, text = line.split(":", 1)
            self.assertEqual(text, f"n={n}")


class Retries(Service):
    def test_retry_after_on_429_is_honoured(self) -> None:
        prompt = self.published("Limited", "ok {{a}}")
        limited = self.admin.request(
            "POST",
            f"/api/v1/organizations/{self.org}/api-keys",
            body={"name": "limited", "scopes": ["prompts:read"], "rateLimit": {"points": 1, "durationSeconds": 2}},
        )["key"]
        retried: List[RetryInfo] = []
        client = PromptClient(self.stack.url, api_key=limited, on_retry=retried.append, cache_ttl=0)
        self.assertEqual(client.invoke(prompt["_id"], {"a": 1}, cache=False).rendered_content, "ok 1")
        started = time.monotonic()
        again = client.invoke(prompt["_id"], {"a": 2}, cache=False)
        waited = time.monotonic() - started
        self.assertEqual(again.rendered_content, "ok 2")
        self.assertGreaterEqual(len(retried), 1)
        first = retried[0]
        self.assertEqual(first.error.code, "RATE_LIMITED")
        self.assertEqual(first.error.status, 429)
        self.assertIsNotNone(first.error.retry_after)
        # The wait is the service's Retry-After, not the backoff (0.25 s at first).
        self.assertEqual(first.delay, first.error.retry_after)
        self.assertGreaterEqual(first.delay, 1.0)
        self.assertGreaterEqual(waited, first.delay)

        # Asked to wait longer than max_retry_after: raised at once, with how long to wait.
        impatient = PromptClient(
            self.stack.url, api_key=limited, retries=RetryOptions(max_retry_after=0.5), cache_ttl=0
        )
        with self.assertRaises(PromptServiceError) as raised:
            impatient.invoke(prompt["_id"], {"a": 3}, cache=False)
            impatient.invoke(prompt["_id"], {"a": 4}, cache=False)
        self.assertEqual(raised.exception.code, "RATE_LIMITED")
        self.assertGreaterEqual(raised.exception.retry_after or 0, 1.0)
        self.assertTrue(raised.exception.request_id)


class ErrorsAndOperations(Service):
    def test_errors_carry_the_code_and_request_id(self) -> None:
        client = self.client(retries=0)
        with self.assertRaises(PromptServiceError) as missing:
            client.invoke("0123456789abcdef01234567", {})
        self.assertEqual((missing.exception.status, missing.exception.code), (404, "NOT_FOUND"))
        self.assertTrue(missing.exception.request_id)
        self.assertIn(missing.exception.request_id or "", str(missing.exception))

        prompt = self.published("Required", "Dear {{ name }}")
        with self.assertRaises(PromptServiceError) as required:
            client.invoke(prompt["_id"], {})
        self.assertEqual(required.exception.code, "MISSING_REQUIRED_VARIABLES")

        with self.assertRaises(PromptServiceError) as bad_key:
            PromptClient(self.stack.url, api_key="pk_not_a_real_key", retries=0).list()
        self.assertEqual((bad_key.exception.status, bad_key.exception.code), (401, "INVALID_CREDENTIALS"))

        with self.assertRaises(PromptServiceError) as no_scope:
            # Publishing needs a user token: an API key is refused.
            client.publish(prompt["_id"])
        self.assertIn(no_scope.exception.status, (401, 403))

        with self.assertRaises(PromptServiceError) as down:
            PromptClient("http://127.0.0.1:9", api_key=self.key, retries=0).list()
        self.assertEqual(down.exception.code, "NETWORK_ERROR")
        self.assertIn("http://127.0.0.1:9/api/v1/prompts", str(down.exception))

    def test_ci_flow_list_get_versions_inject_publish_promote(self) -> None:
        client = self.client()
        prompt = self.published("Release Notes", "Notes for {{ release }}")
        self.republish(prompt["_id"], "Release notes for {{ release }}")

        listed = client.list(search="release notes", limit=5)
        self.assertIn(prompt["_id"], [p["_id"] for p in listed["prompts"]])
        fetched = client.get(prompt["_id"])
        self.assertEqual((fetched.prompt["name"], fetched.source), ("Release Notes", "network"))
        self.assertEqual(client.get(prompt["_id"]).source, "cache")
        self.assertEqual([v["version"] for v in client.versions(prompt["_id"])], [2, 1])

        draft = client.inject(prompt["_id"], {"release": "1.2"})
        self.assertEqual(draft["renderedContent"], "Release notes for 1.2")

        pin = client.promote(prompt["_id"], "production", version=1)
        self.assertEqual(pin["version"], 1)
        self.assertEqual(client.invoke(prompt["_id"], {"release": "x"}, env="production").rendered_content, "Notes for x")
        with self.assertRaises(PromptServiceError) as no_version:
            client.promote(prompt["_id"], "preview", version=9)
        self.assertEqual(no_version.exception.code, "NOT_FOUND")

    def test_invoke_by_slug(self) -> None:
        if not self.stack.has_route("/api/v1/prompts/slug/{slug}/invoke"):
            self.skipTest("this service has no lookup by slug yet")
        prompt = self.published("By Slug", "Slug says {{ x }}")
        client = self.client()
        by_slug = client.invoke_by_slug(prompt["slug"], {"x": "hi"})
        self.assertEqual((by_slug.rendered_content, by_slug.prompt_id), ("Slug says hi", prompt["_id"]))
        self.assertEqual(client.invoke_by_slug(prompt["slug"], {"x": "hi"}).source, "cache")
        self.assertEqual(client.get_by_slug(prompt["slug"]).prompt["_id"], prompt["_id"])
        self.assertIsNone(by_slug.rendered_messages)

        # A chat prompt with model settings: its messages and config come through.
        chat: Dict[str, Any] = client.request(
            "POST",
            "/api/v1/prompts",
            body={
                "name": "Chat By Slug",
                "type": "chat",
                "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi {{ x }}"}],
                "config": {"model": "some-model", "temperature": 0.2},
            },
        )
        self.admin.publish(chat["_id"])
        rendered = client.invoke_by_slug(chat["slug"], {"x": "there"})
        self.assertEqual(
            rendered.rendered_messages,
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}],
        )
        self.assertEqual(rendered.config, {"model": "some-model", "temperature": 0.2})

        # A publish through the client drops what it cached by slug too.
        self.assertEqual(self.admin.invoke_by_slug(prompt["slug"], {"x": "hi"}).source, "network")
        self.assertEqual(self.admin.invoke_by_slug(prompt["slug"], {"x": "hi"}).source, "cache")
        self.republish(prompt["_id"], "Slug now says {{ x }}")
        again = self.admin.invoke_by_slug(prompt["slug"], {"x": "hi"})
        self.assertEqual((again.rendered_content, again.source, again.version), ("Slug now says hi", "network", 2))
        with self.assertRaises(PromptServiceError) as unknown:
            client.invoke_by_slug("no-such-prompt", {})
        self.assertEqual(unknown.exception.code, "NOT_FOUND")


class Pieces(unittest.TestCase):
    def test_fallback_rendering_matches_the_service_rules(self) -> None:
        self.assertEqual(render("Hi {{ name }}, {{ missing }}!", None, {"name": "Ada"}), ("Hi Ada, !", []))
        self.assertEqual(render("{{{a}}} {{ not valid }}", None, {"a": True}), ("{true} {{ not valid }}", []))
        self.assertEqual(render("{{n}} {{o}} {{z}}", None, {"n": 2.0, "o": {"k": [1]}, "z": None}), ('2 {"k":[1]} ', []))
        declared: List[Dict[str, Any]] = [
            {"name": "name"},
            {"name": "greeting", "required": False, "defaultValue": "Hello"},
        ]
        self.assertEqual(render("{{greeting}} {{name}}", declared, {}), ("Hello ", ["name"]))
        client = PromptClient(
            "http://127.0.0.1:9",
            retries=0,
            fallback_templates={"greeting": FallbackTemplate("{{greeting}} {{name}}", declared)},
        )
        with self.assertRaises(PromptServiceError) as raised:
            client.invoke_by_slug("greeting", {})
        self.assertEqual(raised.exception.code, "MISSING_REQUIRED_VARIABLES")
        by_slug = client.invoke_by_slug("greeting", {"name": "Ada"})
        self.assertEqual((by_slug.rendered_content, by_slug.source, by_slug.prompt_id), ("Hello Ada", "fallback", None))

    def test_one_background_refresh_per_key(self) -> None:
        cache: TtlCache[int] = TtlCache(0, None, 10, time.monotonic)
        calls: List[int] = []
        release = threading.Event()

        def refresh() -> None:
            calls.append(1)
            release.wait(5)

        first = cache.revalidate("k", refresh)
        second = cache.revalidate("k", refresh)
        self.assertIs(first, second)
        release.set()
        cache.settled(5)
        self.assertEqual(calls, [1])
        cache.revalidate("k", refresh).join(5)
        self.assertEqual(calls, [1, 1])

    def test_the_package_is_typed(self) -> None:
        import prompt_service

        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(prompt_service.__file__), "py.typed")))

    def test_retry_after_parsing(self) -> None:
        self.assertEqual(parse_retry_after("3", 0), 3.0)
        self.assertEqual(parse_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", 4.0), 6.0)
        self.assertIsNone(parse_retry_after("soon", 0))
        self.assertIsNone(parse_retry_after(None, 0))


if __name__ == "__main__":
    unittest.main()
