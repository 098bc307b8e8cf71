"""Test fixtures: a tiny stdlib HTTP server that plays the HTTP edge, and the
client of a real ``recall up`` when RECALL_HTTP is set."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run without installing

import recall_client  # noqa: E402


class Recorded:
    """One request the fake received."""

    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body

    def json(self) -> Any:
        return json.loads(self.body)


class Fake:
    """A scripted HTTP server: ``fake.reply(status, body, headers)`` queues the next answers."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.replies: list[tuple[int, Any, dict[str, str], float]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                fake.requests.append(Recorded(self.command, self.path, dict(self.headers.items()), body))
                status, payload, headers, delay = fake.replies.pop(0) if fake.replies else (200, {}, {}, 0.0)
                if delay:
                    time.sleep(delay)  # the request was handled; its reply comes too late
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                ctype = "application/problem+json" if status >= 400 or status == 207 else "application/json"
                self.send_header("Content-Type", headers.pop("Content-Type", ctype))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up waiting (a delayed reply)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def reply(
        self, status: int = 200, body: Any = None, headers: dict[str, str] | None = None, delay: float = 0.0
    ) -> "Fake":
        """Queue an answer; ``delay`` holds it back that many seconds (a reply lost or late)."""
        self.replies.append((status, {} if body is None else body, dict(headers or {}), delay))
        return self

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake() -> Any:
    f = Fake()
    yield f
    f.close()


@pytest.fixture
def client(fake: Fake) -> recall_client.Client:
    return recall_client.Client(fake.url, token="s3cret", timeout=5, retry_for=0)  # errors raise at once


@pytest.fixture(scope="session")
def recall_http() -> str:
    url = os.environ.get("RECALL_HTTP")
    if not url:
        pytest.skip("RECALL_HTTP is not set: no recall up to test against")
    return url


@pytest.fixture(scope="session")
def live(recall_http: str) -> recall_client.Client:
    c = recall_client.Client(recall_http, token=os.environ.get("RECALL_TOKEN") or None, timeout=60)
    if not c.ready():
        pytest.fail(f"{recall_http}/readyz is not ready")
    return c
