"""Feed test fixtures: settings that point the connectors at a local upstream server, a way to run
the poller at a chosen moment, and RSS documents."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.feeds.poller import FeedPoller
from app.kit.time import utcnow
from app.watches.run_queue import enqueue_first_runs
from tests.upstream import Upstream


@pytest.fixture
def settings(database_url: str, tmp_path: Path, upstream: Upstream) -> Settings:
    return Settings(
        database_url=database_url,
        secret_key="test-secret-key-that-is-long-enough-for-tests",
        var_dir=tmp_path / "var",
        mail_rate_limit="1000/minute",
        redis_url="",
        outbound_allow_private=True,
        hn_api_url=upstream.url("/hn/api/v1"),
        reddit_url=upstream.url("/reddit"),
        feed_fetch_timeout=2.0,
        feed_fetch_max_bytes=1024 * 1024,
    )


Poll = Callable[..., int]


@pytest.fixture
def poll(settings: Settings, session_factory: sessionmaker[Session]) -> Poll:
    """poll(at=moment, **settings changes) -> feeds polled: one drain of the poller, as of `at`."""

    def run(at: datetime | None = None, **changes: Any) -> int:
        moment = at

        async def main() -> int:
            poller = FeedPoller(
                settings.model_copy(update=changes),
                session_factory,
                on_new_items=enqueue_first_runs,
                clock=(lambda: moment) if moment is not None else utcnow,
            )
            try:
                return await poller.drain()
            finally:
                await poller.aclose()

        return asyncio.run(main())

    return run


def rss(
    items: list[tuple[str, str, datetime | None]], *, title: str = "A feed", encoding: str = "utf-8"
) -> bytes:
    """An RSS 2.0 document of (guid, title, published) items."""
    head = f'<?xml version="1.0" encoding="{encoding}"?><rss version="2.0">'
    parts = [f"{head}<channel><title>{escape(title)}</title>"]
    for guid, item_title, published in items:
        date = f"<pubDate>{format_datetime(published)}</pubDate>" if published else ""
        parts.append(
            f'<item><guid isPermaLink="false">{escape(guid)}</guid><title>{escape(item_title)}</title>'
            f"<link>https://example.com/posts/{escape(guid)}</link>{date}"
            f"<description>&lt;p&gt;Body of {escape(item_title)}&lt;/p&gt;</description>"
            f"<category>news</category><author>ann@example.com (Ann)</author></item>"
        )
    parts.append("</channel></rss>")
    return "".join(parts).encode(encoding)


def make_feed(
    client: TestClient, headers: dict[str, str], sources: list[dict[str, Any]], **fields: Any
) -> dict[str, Any]:
    response = client.post("/v1/feeds", json={"name": "Feed", "sources": sources, **fields}, headers=headers)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def items_of(
    client: TestClient, headers: dict[str, str], feed_id: str, **params: Any
) -> list[dict[str, Any]]:
    response = client.get(f"/v1/feeds/{feed_id}/items", params={"limit": 200, **params}, headers=headers)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["items"]
    return found


def later(minutes: float = 0, *, hours: float = 0, days: float = 0) -> datetime:
    return utcnow() + timedelta(minutes=minutes, hours=hours, days=days)
