"""A fake OpenAI-compatible engine: a real HTTP server on loopback that answers `/v1/models` and
`/v1/chat/completions` the way Ollama or vLLM would, scoring and extracting by markers in the item text
(`score=0.93`, `[name=value]`), or misbehaving on demand (down, prose, an out-of-range score, hanging).
The `llm` fixture serves one (a plugin of tests/conftest.py, so every test folder may use it)."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.upstream import LoopbackServer

SCORE = re.compile(r"score=([0-9.eE+-]+)")
FIELD = re.compile(r"\[([A-Za-z_][A-Za-z0-9_]*)=([^\]]*)\]")


@dataclass
class FakeEngine:
    host: str
    port: int
    # ok, down (503), prose, out_of_range, hang, not_chat (a body that is no chat completion)
    mode: str = "ok"
    default_score: float = 0.5
    models: list[str] = field(default_factory=lambda: ["fake-model"])
    requests: list[dict[str, Any]] = field(default_factory=list)
    hang_seconds: float = 5.0

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if "messages" in r]

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        if self.mode == "down":
            return 503, {"error": "model is loading"}
        if self.mode == "hang":
            time.sleep(self.hang_seconds)
        if self.mode == "not_chat":
            return 200, {"object": "list", "data": []}
        system = body["messages"][0]["content"]
        user = body["messages"][1]["content"]
        if self.mode == "prose":
            content = "Sure! I think this item is quite relevant, maybe 0.7 or so."
        elif "fill named fields" in system:
            wanted = re.findall(r"^- ([^:]+):", user.split("\nItem:")[0], re.MULTILINE)
            found = dict(FIELD.findall(user))
            content = json.dumps({"fields": {name: found.get(name) for name in wanted}})
        else:
            match = SCORE.search(user.split("Item:", 1)[-1])
            score: Any = float(match.group(1)) if match else self.default_score
            if self.mode == "out_of_range":
                score = 7.5
            content = json.dumps({"score": score, "reason": "fake engine"})
        return 200, {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        }


def handler_for(engine: FakeEngine) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models" and engine.mode != "down":
                engine.requests.append({"path": self.path})
                self._send(
                    200, {"object": "list", "data": [{"id": m, "object": "model"} for m in engine.models]}
                )
            else:
                self._send(503 if engine.mode == "down" else 404, {"error": "no"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            engine.requests.append(body)
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": "no"})
                return
            status, payload = engine.answer(body)
            with contextlib.suppress(OSError):
                self._send(status, payload)

    return Handler


@contextlib.contextmanager
def running_engine() -> Iterator[FakeEngine]:
    """A fake engine for as long as the block runs (the fixture's, or a longer-lived one)."""
    # The handler class needs the engine, and the engine needs the server's port: set it after.
    server = LoopbackServer(("127.0.0.1", 0), None)  # type: ignore[arg-type]
    fake = FakeEngine("127.0.0.1", server.server_address[1])
    server.RequestHandlerClass = handler_for(fake)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def llm() -> Iterator[FakeEngine]:
    with running_engine() as engine:
        yield engine
