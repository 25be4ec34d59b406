"""Run drain benchmark: 20,000 feed items through one watch of semantic_filter (a local fake
OpenAI-compatible engine), log and an instant webhook (a local receiver), on PostgreSQL with two
worker processes.

A script, not a test (pytest does not collect this folder). It measures, counts and prints; it asserts
nothing. Run from the repository root:

    python3 tests/benchmarks/drain.py [--items 20000] [--workers 2] [--database-url URL]

What it does:
  1. Creates the database if missing, drops and recreates its public schema, migrates to head.
  2. Starts the fake engine and the receiver, each a process of its own: minimal keep-alive HTTP/1.1
     servers on loopback. The engine answers every chat completion with a JSON score of 0.9 (every
     item passes the filter, so every item runs all three actions); the receiver answers 200 and
     counts every item key it is sent.
  3. Makes one user, one feed and one watch (semantic_filter with fetch_external_content off, log,
     webhook), and stores the items as the poller does: one INSERT for the items and one INSERT ...
     SELECT for their first runs (timed apart: "enqueue").
  4. Starts the worker processes (each the drain of `tidings worker`: two lanes, the default batch of
     100 and 16 actions at once) and times from their start until no run is left to do. The log
     action writes to a file (one line per item).
  5. Counts: runs by state and attempts (a run run twice would have 2 attempts or a second delivery),
     deliveries by state, what the receiver got (each key exactly once), and the log lines.
  6. Prints one JSON line with the figures on stdout; progress goes to stderr. `deliveries_per_second`
     is over the whole run; `deliveries_per_second_while_delivering` over the span from the first
     webhook call to the last answer (the runs of one action are claimed oldest first, so most
     webhook calls come after most filter runs).

Needs a PostgreSQL server (default 127.0.0.1:5432, user postgres, trust auth). Targets (issue 5): at
least 500 runs/s and 300 deliveries/s, no run lost or run twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import signal
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from api import free_port, prepare_database, say  # noqa: E402
from sqlalchemy import func, insert, select  # noqa: E402

from app.config import Settings  # noqa: E402
from app.db import create_db_engine, make_session_factory, transaction  # noqa: E402
from app.identity.accounts import create_user  # noqa: E402
from app.kit.ids import new_ulid  # noqa: E402
from app.models import (  # noqa: E402
    Feed,
    FeedItem,
    Watch,
    WatchAction,
    WatchActionDelivery,
    WatchActionRun,
    WatchFeed,
)
from app.watches.drain import RunDrain  # noqa: E402
from app.watches.run_queue import enqueue_first_runs  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_watches"
TARGET_RUNS = 500.0
TARGET_DELIVERIES = 300.0
LANES = 2


# ----------------------------------------------------------------------------------------- servers


async def _read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:].strip())
    body = await reader.readexactly(length) if length else b""
    return head, body


def _serve(port: int, ready: Any, answer: Any, on_exit: Any = None) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head, body = await _read_request(reader)
                writer.write(answer(head, body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=2048)
        ready.set()
        async with server:
            await server.serve_forever()

    def stop(*_: Any) -> None:
        if on_exit is not None:
            on_exit()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    asyncio.run(main())


def _response(body: bytes, content_type: bytes = b"application/json") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: "
        + content_type
        + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
        + body
    )


def serve_engine(port: int, ready: Any) -> None:
    """The fake engine: a model list, and a score of 0.9 for every chat completion."""
    models = _response(b'{"object":"list","data":[{"id":"bench-model","object":"model"}]}')
    content = json.dumps({"score": 0.9, "reason": "benchmark"})
    chat = _response(
        json.dumps(
            {
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            }
        ).encode()
    )

    def answer(head: bytes, body: bytes) -> bytes:
        return models if head.startswith(b"GET") else chat

    _serve(port, ready, answer)


def serve_receiver(port: int, ready: Any, tally_path: str) -> None:
    """The receiver: 200 for every request, counting each item key; the counts go to `tally_path`
    when it is stopped."""
    keys: Counter[str] = Counter()
    ok = _response(b"", b"text/plain")

    def answer(head: bytes, body: bytes) -> bytes:
        for item in json.loads(body)["items"]:
            keys[item["key"]] += 1
        return ok

    def dump() -> None:
        Path(tally_path).write_text(json.dumps(keys))

    _serve(port, ready, answer, on_exit=dump)


# -------------------------------------------------------------------------------------- database


def seed(factory: Any, items: int, hook_url: str) -> tuple[list[str], float]:
    """The watch and its chain, then the items and their first runs; returns the action ids and how
    long storing the items and enqueueing their runs took."""
    now = datetime.now(UTC)
    with transaction(factory) as session:
        user = create_user(session, email="drain@bench.example", name="Drain")
        account_id = user.account_id
        feed = Feed(id=new_ulid(), account_id=account_id, user_id=user.id, name="Bench", retention_days=365)
        watch = Watch(id=new_ulid(), account_id=account_id, user_id=user.id, name="Bench watch")
        session.add_all([feed, watch])
        session.flush()
        session.add(WatchFeed(watch_id=watch.id, feed_id=feed.id, created_at=now))
        configs = [
            (
                "semantic_filter",
                {
                    "instructions": "Anything about databases",
                    "engine": {"kind": "", "model": ""},
                    "fetch_external_content": False,
                    "threshold": 0.8,
                },
            ),
            (
                "log",
                {
                    "delivery": "instant",
                    "digest_interval_seconds": 0,
                    "include_fields": [],
                    "prefix": "[bench]",
                },
            ),
            (
                "webhook",
                {
                    "url": hook_url,
                    "method": "POST",
                    "headers": {"Authorization": "Bearer bench"},
                    "include_fields": ["title", "url"],
                    "delivery": "instant",
                    "digest_interval_seconds": 0,
                },
            ),
        ]
        actions = []
        for rank, (kind, config) in enumerate(configs):
            action = WatchAction(
                id=new_ulid(), account_id=account_id, watch_id=watch.id, kind=kind, rank=rank, config=config
            )
            session.add(action)
            actions.append(action.id)
        session.flush()
        feed_id = feed.id
    body = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 6
    started = time.perf_counter()
    batch = 1000
    for first in range(0, items, batch):
        rows = [
            {
                "id": new_ulid(),
                "account_id": account_id,
                "feed_id": feed_id,
                "source_id": None,
                "source_kind": "rss",
                "source_label": "Bench",
                "external_id": f"item-{n}",
                "occurred_at": now,
                "data": {
                    "kind": "rss_entry",
                    "source": "rss",
                    "title": f"Item {n}: a database story",
                    "url": f"https://example.com/posts/{n}",
                    "external_url": f"https://example.com/posts/{n}",
                    "external_id": f"item-{n}",
                    "content": body,
                },
            }
            for n in range(first, min(first + batch, items))
        ]
        with transaction(factory) as session:
            session.execute(insert(FeedItem), rows)
            enqueue_first_runs(session, [row["id"] for row in rows], now)
    return actions, time.perf_counter() - started


# ------------------------------------------------------------------------------------------ workers


def worker(url: str, engine_url: str, log_path: str, stop: Any) -> None:
    """One `tidings worker`'s run drain: two lanes until told to stop."""
    handler = logging.FileHandler(log_path)
    log = logging.getLogger("tidings.watches.log")
    log.addHandler(handler)
    log.propagate = False
    settings = Settings(
        database_url=url,
        secret_key="bench-secret-key-that-is-long-enough-for-this",
        outbound_allow_private=True,
        engine_base_url=engine_url,
        engine_model="bench-model",
    )
    engine = create_db_engine(url, pool_size=LANES + 2)
    factory = make_session_factory(engine)

    async def main() -> None:
        drain = RunDrain(settings, factory)

        async def lane() -> None:
            while not stop.is_set():
                if not await drain.run_once():
                    await asyncio.sleep(0.05)

        try:
            await asyncio.gather(*(lane() for _ in range(LANES)))
        finally:
            await drain.aclose()

    asyncio.run(main())
    handler.close()
    engine.dispose()


def remaining(factory: Any) -> int:
    with transaction(factory, write=False) as session:
        return int(
            session.scalar(
                select(func.count()).select_from(WatchActionRun).where(WatchActionRun.completed_at.is_(None))
            )
            or 0
        )


def rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--database-url", default=os.environ.get("TIDINGS_BENCH_DATABASE_URL", DEFAULT_DATABASE_URL)
    )
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    prepare_database(args.database_url)
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"tidings-drain-bench-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    log_path, tally_path = str(scratch / "watch.log"), str(scratch / "tally.json")
    engine_port, receiver_port = free_port(), free_port()
    servers = []
    for target, port, extra in (
        (serve_engine, engine_port, ()),
        (serve_receiver, receiver_port, (tally_path,)),
    ):
        ready = context.Event()
        process = context.Process(target=target, args=(port, ready, *extra), daemon=True)
        process.start()
        ready.wait(10)
        servers.append(process)
    engine = create_db_engine(args.database_url)
    factory = make_session_factory(engine)
    say(f"storing {args.items} items and enqueueing their first runs")
    actions, enqueue_seconds = seed(factory, args.items, f"http://127.0.0.1:{receiver_port}/hook?k=secret")
    say(f"stored and enqueued in {enqueue_seconds:.1f} s; starting {args.workers} workers")
    stop = context.Event()
    workers = [
        context.Process(
            target=worker, args=(args.database_url, f"http://127.0.0.1:{engine_port}/v1", log_path, stop)
        )
        for _ in range(args.workers)
    ]
    started = time.perf_counter()
    for process in workers:
        process.start()
    expected = args.items * len(actions)
    while True:
        time.sleep(0.5)
        left = remaining(factory)
        with transaction(factory, write=False) as session:
            made = session.scalar(select(func.count()).select_from(WatchActionRun)) or 0
        if made >= expected and left == 0:
            break
        if time.perf_counter() - started > 1800:
            say("giving up after 30 minutes")
            break
    seconds = time.perf_counter() - started
    stop.set()
    for process in workers:
        process.join(30)
    for process in servers:
        process.terminate()
        process.join(10)
    with transaction(factory, write=False) as session:
        states = dict(
            session.execute(select(WatchActionRun.state, func.count()).group_by(WatchActionRun.state)).all()
        )
        attempts = dict(
            session.execute(
                select(WatchActionRun.attempts, func.count()).group_by(WatchActionRun.attempts)
            ).all()
        )
        deliveries = dict(
            session.execute(
                select(WatchActionDelivery.state, func.count()).group_by(WatchActionDelivery.state)
            ).all()
        )
        first_call, last_answer = session.execute(
            select(func.min(WatchActionDelivery.started_at), func.max(WatchActionDelivery.completed_at))
        ).one()
        per_action = dict(
            session.execute(
                select(WatchActionRun.action_id, func.count()).group_by(WatchActionRun.action_id)
            ).all()
        )
    tally: Counter[str] = Counter(
        json.loads(Path(tally_path).read_text()) if Path(tally_path).exists() else {}
    )
    log_lines = Path(log_path).read_text(encoding="utf-8").count("\n") if Path(log_path).exists() else 0
    runs = sum(states.values())
    delivered = sum(deliveries.values())
    figures = {
        "benchmark": "drain",
        "items": args.items,
        "workers": args.workers,
        "lanes_per_worker": LANES,
        "enqueue_seconds": round(enqueue_seconds, 2),
        "seconds": round(seconds, 2),
        "runs": runs,
        "runs_per_second": rate(runs, seconds),
        "deliveries": delivered,
        "deliveries_per_second": rate(delivered, seconds),
        # The chain runs in order (every item's filter, then its log, then its webhook), so the webhook
        # calls are made in the last part of the run: their rate while they were being made.
        "deliveries_per_second_while_delivering": rate(
            delivered, (last_answer - first_call).total_seconds() if first_call and last_answer else 0
        ),
        "run_states": states,
        "runs_per_action": [per_action.get(a, 0) for a in actions],
        "runs_with_more_than_one_attempt": sum(n for a, n in attempts.items() if a != 1),
        "delivery_states": deliveries,
        "receiver_requests": sum(tally.values()),
        "receiver_keys": len(tally),
        "keys_received_twice_or_more": sum(1 for n in tally.values() if n > 1),
        "log_lines": log_lines,
        "runs_lost": expected - runs,
        "targets": {"runs_per_second": TARGET_RUNS, "deliveries_per_second": TARGET_DELIVERIES},
    }
    print(json.dumps(figures))
    engine.dispose()


if __name__ == "__main__":
    main()
