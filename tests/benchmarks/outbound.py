"""Outbound HTTP benchmark: what one webhook-sized call costs the caller through `SafeHttp`.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing.
Run from the repository root:

    python3 tests/benchmarks/outbound.py [--calls 20000] [--in-flight 64]

A receiver in its own process (uvloop, HTTP/1.1 keep-alive, 204 to every request) takes `--calls`
POSTs of a 150-byte JSON body with Standard Webhooks' headers, `--in-flight` at a time, from three
clients in turn, each on uvloop as `tidings serve` and `tidings worker` run:

- `safe_http`: `app.kit.safe_http.SafeHttp`, as the event lanes and the watch webhook action call it
  (the address check, the body cap and the deadline included);
- `aiohttp`: a bare `aiohttp.ClientSession`, the library SafeHttp runs on (the reference: what the
  guard costs on top of it);
- `httpx`: a bare `httpx.AsyncClient`, the library SafeHttp ran on until 2026-11-26.

It prints one JSON line: for each client, calls a second and the caller's CPU time a call (user and
system, from the process's own clock: steadier than the rate on a shared machine), and SafeHttp's
ratios to the two others.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import uvloop
from api import free_port

from app.kit.safe_http import SafeHttp

BODY = (
    b'{"type":"contact.opened","timestamp":"2026-11-26T12:00:00.000Z",'
    b'"data":{"contact":{"id":123,"email":"o123@bench.example"},"campaign_id":1}}'
)
HEADERS = {
    "Content-Type": "application/json",
    "webhook-id": "msg_1",
    "webhook-timestamp": "1764158400",
    "webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
}


def receiver_main(port: int, ready: Any) -> None:
    class Conn(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            self.buffer = b""

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            while (head_end := self.buffer.find(b"\r\n\r\n")) >= 0:
                length = 0
                for line in self.buffer[:head_end].split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if len(self.buffer) < head_end + 4 + length:
                    return
                self.buffer = self.buffer[head_end + 4 + length :]
                self.transport.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")

    async def serve() -> None:
        await asyncio.get_running_loop().create_server(Conn, "127.0.0.1", port, backlog=1024)
        ready.set()
        await asyncio.Event().wait()

    uvloop.run(serve())


async def timed(call: Callable[[], Awaitable[None]], calls: int, in_flight: int) -> dict[str, float]:
    slots = asyncio.Semaphore(in_flight)

    async def one() -> None:
        async with slots:
            await call()

    await asyncio.gather(*(one() for _ in range(min(calls, 500))))  # connections up, code warm
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
    return {"calls_per_s": round(calls / seconds, 1), "cpu_ms_per_call": round(1000 * cpu_seconds / calls, 3)}


async def through_safe_http(url: str, calls: int, in_flight: int) -> dict[str, float]:
    async with SafeHttp(allow_private=True, max_connections=in_flight) as http:

        async def call() -> None:
            response = await http.request(
                "POST", url, headers=HEADERS, content=BODY, max_bytes=65536, timeout=10
            )
            assert response.status_code == 204

        return await timed(call, calls, in_flight)


async def through_aiohttp(url: str, calls: int, in_flight: int) -> dict[str, float]:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=in_flight)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call() -> None:
            async with session.post(url, headers=HEADERS, data=BODY, allow_redirects=False) as response:
                await response.read()
                assert response.status == 204

        return await timed(call, calls, in_flight)


async def through_httpx(url: str, calls: int, in_flight: int) -> dict[str, float]:
    import httpx

    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:

        async def call() -> None:
            response = await client.post(url, headers=HEADERS, content=BODY)
            assert response.status_code == 204

        return await timed(call, calls, in_flight)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args()

    port = free_port()
    ready = multiprocessing.Event()
    receiver = multiprocessing.Process(target=receiver_main, args=(port, ready), daemon=True)
    receiver.start()
    ready.wait(10)
    url = f"http://127.0.0.1:{port}/hook"
    results: dict[str, Any] = {}
    try:
        for name, client in (
            ("safe_http", through_safe_http),
            ("aiohttp", through_aiohttp),
            ("httpx", through_httpx),
        ):
            results[name] = uvloop.run(client(url, args.calls, args.in_flight))
    finally:
        receiver.terminate()
    safe = results["safe_http"]["cpu_ms_per_call"]
    print(
        json.dumps(
            {
                "benchmark": "outbound",
                "calls": args.calls,
                "in_flight": args.in_flight,
                **results,
                "safe_http_cpu_to_aiohttp": round(safe / results["aiohttp"]["cpu_ms_per_call"], 2),
                "safe_http_cpu_to_httpx": round(safe / results["httpx"]["cpu_ms_per_call"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
