"""Watch test fixtures: settings pointing the engine at a fake OpenAI-compatible server on loopback,
webhooks and feeds at the loopback upstream, and ways to poll a feed and drain the run queue at a
chosen moment."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.feeds.poller import FeedPoller
from app.kit.time import utcnow
from app.mail.newsletter_service import MailNewsletters
from app.models import WatchActionRun
from app.watches.drain import RunDrain
from app.watches.run_queue import enqueue_first_runs
from tests.fake_engine import FakeEngine
from tests.feeds.conftest import make_feed, rss
from tests.upstream import Upstream

__all__ = ["make_feed", "rss"]


@pytest.fixture
def settings(database_url: str, tmp_path: Path, upstream: Upstream, llm: FakeEngine) -> Settings:
    return Settings(
        database_url=database_url,
        secret_key="test-secret-key-that-is-long-enough-for-tests",
        var_dir=tmp_path / "var",
        mail_rate_limit="1000/minute",
        redis_url="",
        outbound_allow_private=True,
        feed_fetch_timeout=2.0,
        engine_base_url=llm.base_url,
        engine_model="",
        engine_timeout=2.0,
        engine_retries=0,
        webhook_timeout=1.5,
        enrichment_timeout=1.5,
        local_engine_model="no-such-model-package",
    )


Poll = Callable[..., int]
Drain = Callable[..., int]


@pytest.fixture
def poll(settings: Settings, session_factory: sessionmaker[Session]) -> Poll:
    """poll(at=moment) -> feeds polled: one drain of the feed poller (new items enqueue runs)."""

    def run(at: datetime | None = None) -> int:
        async def main() -> int:
            poller = FeedPoller(
                settings,
                session_factory,
                on_new_items=enqueue_first_runs,
                clock=(lambda: at) if at is not None else utcnow,
            )
            try:
                return await poller.drain()
            finally:
                await poller.aclose()

        return asyncio.run(main())

    return run


@pytest.fixture
def drain(settings: Settings, session_factory: sessionmaker[Session]) -> Drain:
    """drain(at=moment, **settings changes) -> runs moved: passes of the run drain until nothing is due
    at `at` (default now). The email API's desk is wired in, as the scheduler wires it."""

    def run(at: datetime | None = None, **changes: Any) -> int:
        async def main() -> int:
            drainer = RunDrain(
                settings.model_copy(update=changes),
                session_factory,
                newsletters=MailNewsletters(),
                clock=(lambda: at) if at is not None else utcnow,
            )
            try:
                return await drainer.drain()
            finally:
                await drainer.aclose()

        return asyncio.run(main())

    return run


def later(seconds: float = 0, *, minutes: float = 0) -> datetime:
    return utcnow() + timedelta(seconds=seconds, minutes=minutes)


def serve_items(upstream: Upstream, entries: list[tuple[str, str]], path: str = "/feed.xml") -> None:
    """An RSS document of (guid, title) entries, each published a minute ago (after any source was
    added in a test, they count as new: the feed's sources start in live mode)."""
    moment = utcnow() + timedelta(seconds=30)
    upstream.serve(path, rss([(guid, title, moment) for guid, title in entries]))


def make_watch(
    client: TestClient,
    headers: dict[str, str],
    feed_ids: list[str],
    actions: list[dict[str, Any]],
    **fields: Any,
) -> dict[str, Any]:
    response = client.post(
        "/v1/watches",
        json={"name": "Watch", "feed_ids": feed_ids, "actions": actions, **fields},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def runs_of(db: Session, action_id: str) -> list[WatchActionRun]:
    db.expire_all()
    return list(
        db.scalars(
            select(WatchActionRun).where(WatchActionRun.action_id == action_id).order_by(WatchActionRun.id)
        )
    )


def activity(client: TestClient, headers: dict[str, str], action_id: str, **params: Any) -> dict[str, Any]:
    response = client.get(
        f"/v1/actions/{action_id}/activity", params={"limit": 200, **params}, headers=headers
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body
