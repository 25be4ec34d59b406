"""A client that streams a large chunked body to a real server and stops as soon as an answer comes,
and the server's memory as Linux counts it (peak resident set, reset before each request)."""

from __future__ import annotations

import select
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Streamed:
    status: int | None  # None: the connection ended without an HTTP answer
    sent: int  # body bytes sent before the answer came
    head: bytes  # the answer's status line and headers, and what of its body arrived


def stream_chunked(base: str, method: str, path: str, headers: dict[str, str], size: int) -> Streamed:
    """Sends `size` bytes as a chunked body (64 KiB chunks of `x`), reading whenever the server
    answers; stops sending at the first byte of an answer, then reads it to the end."""
    parts = urlsplit(base)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Transfer-Encoding: chunked",
        "Connection: close",
    ]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    request_head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    chunk = b"%x\r\n" % CHUNK + b"x" * CHUNK + b"\r\n"
    sent = 0
    answer = b""
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request_head)
        sock.setblocking(False)
        pending = b""
        while True:
            if not pending and sent < size:
                pending, sent = chunk, sent + CHUNK
            elif not pending and sent >= size:
                pending, sent = b"0\r\n\r\n", sent + 1  # the last chunk, once
            readable, writable, _ = select.select([sock], [sock] if pending else [], [], 30)
            if readable:
                break
            if not writable:
                break
            try:
                done = sock.send(pending)
            except (BrokenPipeError, ConnectionResetError):
                break
            pending = pending[done:]
            if sent > size and not pending:
                break
        sock.setblocking(True)
        while True:
            try:
                data = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not data:
                break
            answer += data
    status_line = answer.split(b"\r\n", 1)[0].split()
    status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else None
    return Streamed(status, min(sent, size), answer)


def peak_reset(pid: int) -> int:
    """Resets the process's peak resident set to its current one (Linux's clear_refs, 5) and returns
    that, in bytes."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return _status_kib(pid, "VmRSS") * 1024


def peak(pid: int) -> int:
    """The process's peak resident set since the last reset, in bytes."""
    return _status_kib(pid, "VmHWM") * 1024


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)
