"""``references`` of an invoke result (DESIGN section 12), against a fake gateway in this process
(no stack needed).

    cd clients/python && PYTHONPATH=src python3 -m unittest tests.test_references
"""

from __future__ import annotations

import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List

from prompt_service import PromptClient

PROMPT_ID = "0123456789abcdef01234567"
REFERENCES: List[Dict[str, Any]] = [
    {
        "slug": "policy",
        "promptId": "0123456789abcdef0123456a",
        "versionId": "0123456789abcdef0123456b",
        "version": 3,
        "via": "production",
    },
]


class _Gateway(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        data: Dict[str, Any] = {
            "renderedContent": f"Policy. Hello {body.get('variables', {}).get('name', '')}",
            "variables": body.get("variables", {}),
        }
        if self.path.startswith(f"/api/v1/prompts/{PROMPT_ID}/invoke"):
            data.update(promptId=PROMPT_ID, versionId="0123456789abcdef0123456c", version=1)
            data["references"] = REFERENCES
        elif self.path.startswith("/api/v1/prompts/plain/invoke"):
            data.update(promptId="plain", versionId="0123456789abcdef0123456c", version=1)
        else:
            data.update(unresolvedVariables=[], references=REFERENCES)
        payload = json.dumps({"data": data}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


class References(unittest.TestCase):
    server: ThreadingHTTPServer

    @classmethod
    def setUpClass(cls) -> None:  # noqa: N802 - unittest's name
        cls.server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()

    @classmethod
    def tearDownClass(cls) -> None:  # noqa: N802 - unittest's name
        cls.server.shutdown()
        cls.server.server_close()

    def client(self) -> PromptClient:
        return PromptClient(f"http://127.0.0.1:{self.server.server_port}", api_key="pm_test")

    def test_invoke_exposes_the_included_prompts(self) -> None:
        result = self.client().invoke(PROMPT_ID, {"name": "Ada"})
        self.assertEqual(result.rendered_content, "Policy. Hello Ada")
        self.assertEqual(result.references, REFERENCES)
        # A copy: changing it does not change the cached answer.
        refs = result.references
        assert refs is not None
        refs[0]["slug"] = "changed"
        self.assertEqual(self.client().invoke(PROMPT_ID, {"name": "Ada"}).references, REFERENCES)

    def test_a_template_without_references_has_none(self) -> None:
        self.assertIsNone(self.client().invoke("plain").references)

    def test_inject_answers_references_too(self) -> None:
        self.assertEqual(self.client().inject(PROMPT_ID, {})["references"], REFERENCES)


if __name__ == "__main__":
    unittest.main()
