"""Feed polling benchmark: one full poll cycle of 1,000 RSS feeds (50 items each) into PostgreSQL,
against the parser alone on the same documents.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing.
Run from the repository root:

    python3 tests/benchmarks/poll.py [--feeds 1000] [--items 50] [--database-url URL]

What it does:
  1. Creates the database if missing, drops and recreates its public schema, migrates to head.
  2. Builds the documents (RSS 2.0, 50 items each, about 39 KB, HTML descriptions) and serves them
     from a local HTTP server in a process of its own (asyncio, keep-alive, Content-Length).
  3. Parser alone, in this process, on the same documents: fastfeedparser (what Tidings uses),
     feedparser with its defaults, and feedparser with sanitize_html=False, resolve_relative_uris=False;
     and Tidings' own parse step (fastfeedparser plus decoding and payload building).
  4. Makes one user and 1,000 feeds of one RSS source each, whose last_event_at lies before every
     item (a backfill, so every item is new), then runs the poller once until nothing is due: fetch
     through the SSRF-safe client, parse off the event loop, store, with the default caps (32 requests
     in flight, 4 to one host). All the documents are on one host unless `--hosts N` spreads the feeds
     over 127.0.0.1 to 127.0.0.N (as real feeds are spread over many hosts); `--per-host` changes the cap.
  5. Prints one JSON line with the figures on stdout; progress goes to stderr.

Needs a PostgreSQL server (default 127.0.0.1:5432, user postgres, trust auth).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from api import free_port, prepare_database, say  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from app.config import Settings  # noqa: E402
from app.db import create_db_engine, make_session_factory, transaction  # noqa: E402
from app.feeds.connectors.rss import parse_document  # noqa: E402
from app.feeds.poller import FeedPoller  # noqa: E402
from app.feeds.source_service import new_source  # noqa: E402
from app.feeds.specs import SourceInput, spec_hash  # noqa: E402
from app.identity.accounts import create_user  # noqa: E402
from app.kit.ids import new_ulid  # noqa: E402
from app.models import Feed, FeedItem  # noqa: E402
from app.watches.run_queue import enqueue_first_runs  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_feeds"
TARGET_RATIO = 0.5  # the whole cycle at least half the parser-alone throughput
EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


# --------------------------------------------------------------------------------------- documents


def document(feed: int, items: int) -> bytes:
    parts = [
        '<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<channel><title>Feed {feed}</title><link>https://example.com/{feed}/</link>"
        "<description>A benchmark feed</description>"
    ]
    body = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 6
    for n in range(items):
        published = format_datetime(EPOCH + timedelta(minutes=feed * items + n))
        parts.append(
            f"<item><title>Item {n} of feed {feed} &amp; friends</title>"
            f"<link>https://example.com/{feed}/posts/{n}</link>"
            f'<guid isPermaLink="false">feed{feed}-item{n}</guid><pubDate>{published}</pubDate>'
            f"<dc:creator>Author {n}</dc:creator><category>news</category><category>tech</category>"
            f'<description><![CDATA[<p>Paragraph one of item {n} with <a href="/rel/{n}">a relative link</a>'
            f" and <b>bold</b> text. {body}</p><p>Second paragraph.</p>]]></description></item>"
        )
    parts.append("</channel></rss>")
    return "".join(parts).encode()


# ------------------------------------------------------------------------------------------ server


def loopback_hosts(count: int) -> list[str]:
    """127.0.0.1 to 127.0.0.N: all loopback on Linux, and distinct hosts to the poller's per-host cap."""
    return [f"127.0.0.{n}" for n in range(1, count + 1)]


def serve(port: int, feeds: int, items: int, ready: Any, hosts: int = 1) -> None:
    """A minimal keep-alive HTTP/1.1 server of prebuilt responses (a process of its own), listening on
    each of the first `hosts` loopback addresses."""
    responses = {}
    for n in range(feeds):
        body = document(n, items)
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml; charset=utf-8\r\n"
            f'ETag: "f{n}"\r\nContent-Length: {len(body)}\r\n\r\n'
        ).encode()
        responses[f"/feed/{n}.xml".encode()] = head + body
    missing = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1]
                writer.write(responses.get(path, missing))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, loopback_hosts(hosts), port, backlog=1024)
        ready.set()
        async with server:
            await server.serve_forever()

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    asyncio.run(main())


# -------------------------------------------------------------------------------------- database


def seed_feeds(factory: Any, bases: list[str], feeds: int) -> None:
    """`feeds` feeds of one RSS source each, dealt round the servers' base URLs."""
    now = datetime.now(UTC)
    start = EPOCH - timedelta(days=1)
    with transaction(factory) as session:
        user = create_user(session, email="poller@bench.example", name="Poller")
        for n in range(feeds):
            feed = Feed(
                id=new_ulid(),
                account_id=user.account_id,
                user_id=user.id,
                name=f"Feed {n}",
                # Long enough that every item of the documents is within retention.
                retention_days=365,
                next_poll_at=now,
                default_field_map={},
            )
            session.add(feed)
            item = SourceInput.model_validate(
                {
                    "spec": {"kind": "rss", "url": f"{bases[n % len(bases)]}/feed/{n}.xml"},
                    "last_event_at": start.isoformat(),
                }
            )
            source = new_source(feed.id, user.account_id, spec_hash(item.spec), item, now)
            source.start_at = source.last_event_at = start
            session.add(source)
        session.flush()


# ------------------------------------------------------------------------------------------ measure


def rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def parser_alone(documents: list[bytes]) -> dict[str, Any]:
    import fastfeedparser
    import feedparser

    since = EPOCH - timedelta(days=1)
    candidates: dict[str, Callable[[bytes], Any]] = {
        "fastfeedparser": lambda d: fastfeedparser.parse(d, include_media=False, include_enclosures=False),
        "feedparser_defaults": lambda d: feedparser.parse(d),
        "feedparser_no_sanitize_no_resolve": lambda d: feedparser.parse(
            d, sanitize_html=False, resolve_relative_uris=False
        ),
        "tidings_parse_step": lambda d: parse_document(
            d, "utf-8", feed_url="https://example.com/", field_map={}, since=since
        ),
    }
    figures: dict[str, Any] = {}
    for name, parse in candidates.items():
        # feedparser is slow: a sample of the documents gives its rate without minutes of waiting.
        sample = documents if name in ("fastfeedparser", "tidings_parse_step") else documents[:100]
        started = time.perf_counter()
        entries = 0
        for doc in sample:
            parsed = parse(doc)
            entries += len(parsed) if isinstance(parsed, list) else len(parsed["entries"])
        seconds = time.perf_counter() - started
        figures[name] = {"docs": len(sample), "docs_per_s": rate(len(sample), seconds), "entries": entries}
        say(f"parser alone, {name}: {figures[name]['docs_per_s']} docs/s over {len(sample)} documents")
    return figures


def poll_cycle(settings: Settings, factory: Any) -> tuple[int, float]:
    async def main() -> int:
        poller = FeedPoller(settings, factory, on_new_items=enqueue_first_runs)
        try:
            return await poller.drain()
        finally:
            await poller.aclose()

    started = time.perf_counter()
    polled = asyncio.run(main())
    return polled, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--feeds", type=int, default=1000)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--per-host", type=int, default=4)
    parser.add_argument(
        "--hosts", type=int, default=1, help="loopback addresses the feeds are spread over (1 to 250)"
    )
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL))
    args = parser.parse_args()

    prepare_database(args.database_url)
    say(f"building {args.feeds} documents of {args.items} items")
    documents = [document(n, args.items) for n in range(args.feeds)]
    port = free_port()
    ready = multiprocessing.Event()
    server = multiprocessing.Process(
        target=serve, args=(port, args.feeds, args.items, ready, args.hosts), daemon=True
    )
    server.start()
    engine = create_db_engine(args.database_url)
    try:
        if not ready.wait(30):
            raise RuntimeError("the document server did not start")
        parsers = parser_alone(documents)
        factory = make_session_factory(engine)
        seed_feeds(factory, [f"http://{host}:{port}" for host in loopback_hosts(args.hosts)], args.feeds)
        settings = Settings(
            database_url=args.database_url,
            outbound_allow_private=True,
            feed_poll_concurrency=args.concurrency,
            feed_poll_per_host=args.per_host,
        )
        say(f"polling {args.feeds} feeds once")
        polled, seconds = poll_cycle(settings, factory)
        with factory() as session:
            stored = session.scalar(select(func.count()).select_from(FeedItem)) or 0
            failed = (
                session.scalar(select(func.count()).select_from(Feed).where(Feed.last_error.is_not(None)))
                or 0
            )
        feeds_per_s = rate(polled, seconds)
        reference = parsers["fastfeedparser"]["docs_per_s"]
        result = {
            "feeds": args.feeds,
            "items_per_feed": args.items,
            "document_bytes": len(documents[0]),
            "cycle": {
                "feeds_polled": polled,
                "feeds_failed": failed,
                "items_stored": stored,
                "seconds": round(seconds, 2),
                "feeds_per_s": feeds_per_s,
                "items_per_s": rate(stored, seconds),
            },
            "parser_alone": parsers,
            "reference": "fastfeedparser",
            "ratio_to_parser_alone": round(feeds_per_s / reference, 3) if reference else None,
            "target_ratio": TARGET_RATIO,
            "settings": {
                "feed_poll_concurrency": args.concurrency,
                "feed_poll_per_host": args.per_host,
                "hosts": args.hosts,
            },
            "cpus": os.cpu_count(),
        }
        print(json.dumps(result), flush=True)
    finally:
        engine.dispose()
        server.terminate()
        server.join(10)


if __name__ == "__main__":
    main()
