"""The serving app's own scheduler drains runs: a watch created through the API delivers a new item
of its feed to a local receiver without anyone calling the drain (committed rows; the app owns its
database)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session

from app.config import Settings
from app.identity.accounts import create_user
from app.identity.tokens import create_personal_token
from app.kit.time import utcnow
from app.main import create_app
from app.models import Account
from tests.feeds.conftest import rss
from tests.upstream import Upstream


@pytest.fixture
def committed_token(engine: Engine) -> Iterator[str]:
    with Session(engine) as session:
        user = create_user(session, email="drainer@example.com", name="D")
        _, token = create_personal_token(session, user)
        account_id = user.account_id
        session.commit()
    yield token
    with Session(engine) as session:
        session.execute(delete(Account).where(Account.id == account_id))
        session.commit()


def test_the_scheduler_runs_a_watch_chain(
    database_url: str, tmp_path: Path, committed_token: str, upstream: Upstream
) -> None:
    upstream.serve("/feed.xml", rss([("bg-1", "In the background", utcnow() + timedelta(seconds=2))]))
    upstream.serve("/hook", "ok", 200)
    settings = Settings(
        database_url=database_url,
        var_dir=tmp_path / "var",
        secret_key="background-drain-secret-key-long-enough",
        outbound_allow_private=True,
        mail_rate_limit="1000/minute",
    )
    headers = {"Authorization": f"Bearer {committed_token}"}
    with TestClient(create_app(settings)) as client:
        since = (utcnow() - timedelta(minutes=1)).isoformat()
        source = {"spec": {"kind": "rss", "url": upstream.url("/feed.xml")}, "last_event_at": since}
        # The watch first, so it is subscribed before the feed's first poll stores the item.
        feed = client.post(
            "/v1/feeds", json={"name": "BG", "sources": [source], "is_active": False}, headers=headers
        ).json()
        action = {"kind": "webhook", "config": {"url": upstream.url("/hook")}}
        watch = client.post(
            "/v1/watches", json={"name": "W", "feed_ids": [feed["id"]], "actions": [action]}, headers=headers
        ).json()
        client.patch(f"/v1/feeds/{feed['id']}", json={"is_active": True}, headers=headers)
        deadline = time.monotonic() + 30
        runs: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            page = client.get(f"/v1/actions/{watch['actions'][0]['id']}/activity", headers=headers).json()
            runs = page["items"]
            if runs and runs[0]["state"] == "succeeded":
                break
            time.sleep(0.2)
        assert [r["state"] for r in runs] == ["succeeded"]
        [call] = upstream.requests_to("/hook")
        assert json.loads(call.body)["items"][0]["key"] == "rss:bg-1"
