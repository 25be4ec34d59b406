"""The serving app's own scheduler polls feeds: a feed created through the API fills with items from a
local server without anyone calling the poller (committed rows; the app owns its database)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from app.config import Settings
from app.kit.time import utcnow
from app.main import create_app
from tests.feeds.conftest import rss
from tests.processes import committed_users
from tests.upstream import Upstream


@pytest.fixture
def committed_token(engine: Engine) -> Iterator[str]:
    """A token whose user is really committed: the app under test owns its database connections."""
    with committed_users(engine, "poller@example.com") as [(_, token)]:
        yield token


def test_the_scheduler_polls_a_new_feed(
    database_url: str, tmp_path: Path, committed_token: str, upstream: Upstream
) -> None:
    upstream.serve("/feed.xml", rss([("bg-1", "In the background", utcnow() + timedelta(seconds=2))]))
    settings = Settings(
        database_url=database_url,
        var_dir=tmp_path / "var",
        secret_key="background-polling-secret-key-long-enough",
        outbound_allow_private=True,
        mail_rate_limit="1000/minute",
    )
    headers = {"Authorization": f"Bearer {committed_token}"}
    with TestClient(create_app(settings)) as client:
        # Backfill from a minute ago, so the item is wanted at the very first poll.
        since = (utcnow() - timedelta(minutes=1)).isoformat()
        source = {"spec": {"kind": "rss", "url": upstream.url("/feed.xml")}, "last_event_at": since}
        feed = client.post("/v1/feeds", json={"name": "BG", "sources": [source]}, headers=headers).json()
        deadline = time.monotonic() + 20
        items: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            items = client.get(f"/v1/feeds/{feed['id']}/items", headers=headers).json()["items"]
            if items:
                break
            time.sleep(0.2)
        assert [i["external_id"] for i in items] == ["bg-1"]
        state = client.get(f"/v1/feeds/{feed['id']}", headers=headers).json()
        assert state["last_polled_at"] is not None
        assert state["last_error"] is None
