"""Rendering here: the shared vectors, and get_renderable against the embedded default.

    cd clients/python && PYTHONPATH=src python3 -m unittest tests.test_a_local
"""

from __future__ import annotations

import atexit
import json
import time
import unittest
from pathlib import Path
from typing import Any, Dict, List

from prompt_service import PromptServiceError, RetryOptions
from prompt_service._template import Renderable, TemplateSyntaxError, compile_logic

from .stack import free_port
from .test_client import STACK, Service

# The same file the TypeScript client and the render service run (packages/template/vectors).
VECTORS = Path(__file__).resolve().parents[3] / "packages/template/vectors/render.json"


def setUpModule() -> None:  # noqa: N802 - unittest's name
    # One stack for every module: started here (this module runs first), closed by
    # test_client's tearDownModule, or at exit when this module runs alone.
    STACK.start()
    atexit.register(STACK.close)


def _chat_template(messages: List[Dict[str, Any]]) -> str:
    return "\n\n".join(
        f"[placeholder {m['name']}]" if m.get("type") == "placeholder" else f"[{m['role']}]\n{m['content']}"
        for m in messages
    )


class ChatLogic(unittest.TestCase):
    """Each chat message is a template of its own: logic renders here, references go to invoke."""

    def test_logic_in_messages_and_references_refused(self) -> None:
        messages: List[Dict[str, Any]] = [
            {"role": "system", "content": "{{#if vip}}Be extra kind.{{else}}Be kind.{{/if}}"},
            {"role": "user", "content": "Hi {{name}}"},
        ]
        out = Renderable(_chat_template(messages), [], messages).render({"vip": True, "name": "Ada"})
        self.assertEqual(
            out["renderedMessages"],
            [{"role": "system", "content": "Be extra kind."}, {"role": "user", "content": "Hi Ada"}],
        )
        including = [{"role": "system", "content": "{{> policy@production}}"}, *messages]
        renderable = Renderable(_chat_template(including), [], including)
        self.assertEqual(renderable.references, ["policy@production"])
        with self.assertRaises(PromptServiceError) as raised:
            renderable.render({"name": "Ada"})
        self.assertEqual(raised.exception.code, "REFERENCES_NOT_LOCAL")


class LogicSyntax(unittest.TestCase):
    """What the service refuses at save is refused here too (packages/template, logic.ts)."""

    def test_blocks_nest_at_most_64_levels(self) -> None:
        ok = "{{#if a}}" * 64 + "x" + "{{/if}}" * 64
        self.assertIsNotNone(compile_logic(ok))
        deep = "{{#if a}}" * 65 + "x" + "{{/if}}" * 65
        with self.assertRaises(TemplateSyntaxError):
            compile_logic(deep)
        # Thousands of levels: a syntax error, not Python's recursion limit at render.
        with self.assertRaises(TemplateSyntaxError):
            compile_logic("{{#if a}}" * 5000 + "x" + "{{/if}}" * 5000)

    def test_proto_is_no_block_operand(self) -> None:
        for kw in ("if", "unless", "each"):
            with self.assertRaises(TemplateSyntaxError):
                compile_logic(f"{{{{#{kw} __proto__}}}}x{{{{/{kw}}}}}")


class Vectors(unittest.TestCase):
    def test_the_shared_vectors(self) -> None:
        cases: List[Dict[str, Any]] = json.loads(VECTORS.read_text("utf-8"))["cases"]
        self.assertGreater(len(cases), 10)
        for case in cases:
            with self.subTest(case["name"]):
                messages = case.get("messages")
                template = case.get("template") or _chat_template(messages or [])
                renderable = Renderable(template, case["variables"], messages)
                if "expected" in case:
                    out = renderable.render(case["values"])
                    self.assertEqual(out["renderedContent"], case["expected"]["renderedContent"])
                    self.assertEqual(out.get("renderedMessages"), case["expected"].get("renderedMessages"))
                    continue
                with self.assertRaises(PromptServiceError) as raised:
                    renderable.render(case["values"])
                error = raised.exception
                expected = case["error"]
                self.assertEqual((error.status, error.code), (expected.get("status", 400), expected["code"]))
                if "details" in expected:
                    self.assertEqual(error.details, expected["details"])
                    continue
                names = (
                    [d["path"].replace("/body/variables/", "") for d in error.details]
                    if error.code == "VALIDATION_ERROR"
                    else error.details
                )
                self.assertEqual(names, case["error"]["names"])


class RenderLocally(Service):
    def test_300_renders_with_distinct_variables_make_one_network_call(self) -> None:
        prompt = self.published("Local many", "Hello {{ name }} #{{n}}")
        calls: List[str] = []
        client = self.client(cache_ttl=60, on_retry=None)
        original = client._transport.call  # noqa: SLF001 - counting what goes over the wire

        def counting(route: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(route.operation)
            return original(route, *args, **kwargs)

        setattr(client._transport, "call", counting)  # noqa: B010, SLF001 - a method replaced for counting
        for i in range(300):
            out = client.render_locally(prompt["_id"], {"name": f"user-{i}", "n": i})
            self.assertEqual(out.rendered_content, f"Hello user-{i} #{i}")
            self.assertEqual((out.version, out.source), (1, "network" if i == 0 else "cache"))
        self.assertEqual(calls, ["resolvePrompt"])
        # The same as the service's own rendering.
        served = client.invoke(prompt["_id"], {"name": "Ada", "n": 1.5})
        self.assertEqual(client.render_locally(prompt["_id"], {"name": "Ada", "n": 1.5}).rendered_content, served.rendered_content)
        with self.assertRaises(PromptServiceError) as raised:
            client.render_locally(prompt["_id"], {"n": 1})
        self.assertEqual((raised.exception.code, raised.exception.details), ("MISSING_REQUIRED_VARIABLES", ["name"]))

    def test_chat_by_slug(self) -> None:
        created = self.admin.request(
            "POST",
            "/api/v1/prompts",
            body={
                "name": "Local chat",
                "slug": "local-chat",
                "type": "chat",
                "config": {"model": "m"},
                "messages": [
                    {"role": "system", "content": "You help {{customer}}."},
                    {"type": "placeholder", "name": "history"},
                ],
            },
        )
        self.admin.publish(created["_id"])
        client = self.client()
        values = {"customer": "Ada", "history": [{"role": "user", "content": "Hi"}]}
        local = client.render_locally_by_slug("local-chat", values)
        served = client.invoke_by_slug("local-chat", values, cache=False)
        self.assertEqual(local.rendered_messages, served.rendered_messages)
        self.assertEqual(local.rendered_content, served.rendered_content)
        self.assertEqual((local.config, local.prompt_id, local.version), ({"model": "m"}, created["_id"], 1))
        with self.assertRaises(PromptServiceError) as raised:
            client.render_locally_by_slug("local-chat", {"customer": "x", "history": "not a list"})
        self.assertEqual(raised.exception.code, "VALIDATION_ERROR")

    def test_an_outage_serves_the_cached_template_then_the_fallback(self) -> None:
        prompt = self.published("Local outage", "Cached {{ who }}")
        client = self.client(
            cache_ttl=0.2,
            retries=RetryOptions(retries=0),
            timeout=2,
            fallback_templates={"never-fetched": "Fallback {{who}}"},
        )
        self.assertEqual(client.render_locally(prompt["_id"], {"who": "a"}).source, "network")
        # The outage: the service's address stops answering (cheaper than stopping the stack,
        # which test_client's stale test already does for invoke).
        client._transport._base = f"http://127.0.0.1:{free_port()}"  # noqa: SLF001
        time.sleep(0.3)
        stale = client.render_locally(prompt["_id"], {"who": "b"})
        self.assertEqual((stale.rendered_content, stale.source), ("Cached b", "stale"))
        client.settled(10)
        self.assertEqual(client.render_locally(prompt["_id"], {"who": "c"}).source, "stale")
        client.settled(10)
        fallback = client.render_locally_by_slug("never-fetched", {"who": "c"})
        self.assertEqual((fallback.rendered_content, fallback.source, fallback.version), ("Fallback c", "fallback", None))
        with self.assertRaises(PromptServiceError) as raised:
            client.render_locally("0123456789abcdef01234567", {})
        self.assertEqual(raised.exception.code, "NETWORK_ERROR")

    def test_logic_renders_here_as_the_service_renders_it(self) -> None:
        prompt = self.published(
            "Local logic", "{{#if vip}}VIP {{/if}}{{#each items}}{{@index}}={{this.name}};{{else}}none{{/each}}"
        )
        client = self.client()
        cases: List[Dict[str, Any]] = [{"vip": 1, "items": [{"name": "a"}, {"name": 2.0}]}, {"vip": "", "items": []}]
        for values in cases:
            local = client.render_locally(prompt["_id"], values)
            served = client.invoke(prompt["_id"], values, cache=False)
            self.assertEqual(local.rendered_content, served.rendered_content)
        with self.assertRaises(PromptServiceError) as raised:
            client.render_locally(prompt["_id"], {"vip": 1, "items": "abc"})
        self.assertEqual((raised.exception.status, raised.exception.code), (400, "VALIDATION_ERROR"))

    def test_a_prompt_with_references_renders_at_the_service(self) -> None:
        intro = self.client().request(
            "POST", "/api/v1/prompts", body={"name": "Local intro", "slug": "local-intro", "template": "Hi {{who}}."}
        )
        self.admin.publish(intro["_id"])
        parent = self.published("Local parent", "{{> local-intro}} Bye.")
        calls: List[str] = []
        client = self.client()
        original = client._transport.call  # noqa: SLF001 - counting what goes over the wire

        def counting(route: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(route.operation)
            return original(route, *args, **kwargs)

        setattr(client._transport, "call", counting)  # noqa: B010, SLF001 - a method replaced for counting
        renderable = client.get_renderable(parent["_id"])
        self.assertTrue(renderable.references)
        with self.assertRaises(PromptServiceError) as raised:
            renderable.render({"who": "Ada"})
        self.assertEqual((raised.exception.code, raised.exception.details), ("REFERENCES_NOT_LOCAL", ["local-intro"]))
        out = client.render_locally(parent["_id"], {"who": "Ada"})
        self.assertEqual((out.rendered_content, out.source), ("Hi Ada. Bye.", "network"))
        self.assertEqual([r["slug"] for r in out.references or []], ["local-intro"])
        self.assertEqual(client.render_locally(parent["_id"], {"who": "Ada"}).source, "cache")
        self.assertEqual(calls, ["resolvePrompt", "invokePrompt"])

    def test_the_output_cap_is_the_service_s(self) -> None:
        prompt = self.published("Local cap", "{{a}}{{a}}")
        with self.assertRaises(PromptServiceError) as raised:
            self.client().render_locally(prompt["_id"], {"a": "x" * 600_000})
        self.assertEqual((raised.exception.status, raised.exception.code), (422, "RENDER_TOO_LARGE"))
        self.assertEqual(raised.exception.details, {"maxOutputBytes": 1024 * 1024})
        small = self.client(max_output_bytes=1024)
        self.assertEqual(len(small.render_locally(prompt["_id"], {"a": "x" * 512}).rendered_content), 1024)
        with self.assertRaises(PromptServiceError) as raised:
            small.render_locally(prompt["_id"], {"a": "x" * 513})
        self.assertEqual(raised.exception.details, {"maxOutputBytes": 1024})


if __name__ == "__main__":
    unittest.main()
