"""A real HTTP server on loopback that plays an upstream (a feed host, the HN search API, Reddit, a
misbehaving server): routes are set per test, and every request is recorded."""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

# No handler runs longer than this, whatever it was asked to do (never-ending and slow responses).
HANDLER_LIMIT_SECONDS = 10.0


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""


Handler = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Upstream:
    host: str
    port: int
    routes: dict[str, Handler] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def route(self, path: str, handler: Handler) -> None:
        self.routes[path] = handler

    def serve(self, path: str, body: bytes | str, status: int = 200, **headers: str) -> None:
        self.route(path, respond(body, status, headers))

    def requests_to(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]


def respond(body: bytes | str, status: int = 200, headers: dict[str, str] | None = None) -> Handler:
    data = body.encode() if isinstance(body, str) else body

    def handle(request: BaseHTTPRequestHandler) -> None:
        request.send_response(status)
        sent = {k.lower() for k in (headers or {})}
        for name, value in (headers or {}).items():
            request.send_header(name.replace("_", "-"), value)
        if "content-type" not in sent:
            request.send_header("Content-Type", "application/xml")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(data)

    return handle


def endless(chunk: bytes = b"<item>" * 100, pause: float = 0.05) -> Handler:
    """Headers, then a body that never ends (until the client hangs up or the handler limit)."""

    def handle(request: BaseHTTPRequestHandler) -> None:
        request.send_response(200)
        request.send_header("Content-Type", "application/rss+xml")
        request.end_headers()
        request.close_connection = True
        stop = time.monotonic() + HANDLER_LIMIT_SECONDS
        try:
            request.wfile.write(b'<?xml version="1.0"?><rss version="2.0"><channel>')
            while time.monotonic() < stop:
                request.wfile.write(chunk)
                request.wfile.flush()
                time.sleep(pause)
        except OSError:
            pass

    return handle


def big_body(size: int, *, declare_length: bool) -> Handler:
    """`size` bytes, with or without a Content-Length saying so."""

    def handle(request: BaseHTTPRequestHandler) -> None:
        request.send_response(200)
        request.send_header("Content-Type", "application/rss+xml")
        if declare_length:
            request.send_header("Content-Length", str(size))
        request.end_headers()
        request.close_connection = True
        block = b"x" * 65536
        sent = 0
        try:
            while sent < size:
                request.wfile.write(block)
                sent += len(block)
        except OSError:
            pass

    return handle


def gzip_bomb(expanded: int = 64 * 1024 * 1024) -> Handler:
    """A small gzip body that expands to `expanded` bytes."""
    compressed = gzip.compress(b"\0" * expanded, compresslevel=9)

    def handle(request: BaseHTTPRequestHandler) -> None:
        request.send_response(200)
        request.send_header("Content-Type", "application/rss+xml")
        request.send_header("Content-Encoding", "gzip")
        request.send_header("Content-Length", str(len(compressed)))
        request.end_headers()
        with contextlib.suppress(OSError):
            request.wfile.write(compressed)

    return handle


def slow(seconds: float, then: Handler) -> Handler:
    def handle(request: BaseHTTPRequestHandler) -> None:
        time.sleep(min(seconds, HANDLER_LIMIT_SECONDS))
        with contextlib.suppress(OSError):
            then(request)

    return handle


class LoopbackServer(ThreadingHTTPServer):
    """A thread per connection, with room in the listen queue for a worker's whole batch of calls at
    once (socketserver's default backlog of 5 makes the kernel drop connections past it, and the
    client sees a read error: a failure of the test's server, not of the code under test)."""

    request_queue_size = 128
    daemon_threads = True


def _server(upstream_ref: list[Upstream]) -> type[BaseHTTPRequestHandler]:
    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            upstream = upstream_ref[0]
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            upstream.seen.append(Seen(self.command, parts.path, parse_qs(parts.query), headers, body))
            handler = upstream.routes.get(parts.path)
            if handler is None:
                respond(b"not here", 404, {"Content-Type": "text/plain"})(self)
                return
            handler(self)

        do_GET = do_POST = do_PUT = do_PATCH = do_HEAD = _handle

    return RequestHandler


@contextlib.contextmanager
def running_upstream() -> Iterator[Upstream]:
    """A loopback upstream for as long as the block runs (the fixture's, or a longer-lived one)."""
    ref: list[Upstream] = []
    server = LoopbackServer(("127.0.0.1", 0), _server(ref))
    ref.append(Upstream("127.0.0.1", server.server_address[1]))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield ref[0]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with running_upstream() as server:
        yield server
