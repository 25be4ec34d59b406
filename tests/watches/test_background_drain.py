"""The serving app's own scheduler drains runs: a watch created through the API delivers a new item
of its feed to a local receiver without anyone calling the drain (committed rows; the app owns its
database)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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
    with committed_users(engine, "drainer@example.com") as [(_, token)]:
        yield token


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


def test_worker_once_polls_the_due_feeds_and_runs_their_chains(
    database_url: str, tmp_path: Path, committed_token: str, upstream: Upstream
) -> None:
    """`tidings worker --once` in a process of its own: the feed created through the API is polled, the
    run its new item enqueued is run (a webhook to the local receiver), and the command exits."""
    upstream.serve("/once.xml", rss([("once-1", "Once", utcnow() + timedelta(seconds=2))]))
    upstream.serve("/once-hook", "ok", 200)
    settings = Settings(
        database_url=database_url,
        var_dir=tmp_path / "var",
        secret_key="worker-once-secret-key-long-enough",
        outbound_allow_private=True,
        mail_rate_limit="1000/minute",
        scheduler=False,
    )
    headers = {"Authorization": f"Bearer {committed_token}"}
    with TestClient(create_app(settings)) as client:
        since = (utcnow() - timedelta(minutes=1)).isoformat()
        source = {"spec": {"kind": "rss", "url": upstream.url("/once.xml")}, "last_event_at": since}
        feed = client.post("/v1/feeds", json={"name": "Once", "sources": [source]}, headers=headers).json()
        action = {"kind": "webhook", "config": {"url": upstream.url("/once-hook")}}
        body = {"name": "W", "feed_ids": [feed["id"]], "actions": [action]}
        watch = client.post("/v1/watches", json=body, headers=headers).json()
    done = subprocess.run(
        [sys.executable, "-m", "app", "worker", "--once"],
        env={
            **os.environ,
            "TIDINGS_DATABASE_URL": database_url,
            "TIDINGS_VAR_DIR": str(tmp_path / "var"),
            "TIDINGS_SECRET_KEY": "worker-once-secret-key-long-enough",
            "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "true",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = re.fullmatch(
        r"sent (\d+) emails, polled (\d+) feeds, ran (\d+) watch runs, delivered \d+ webhook events\n",
        done.stdout,
    )
    assert counts is not None, done.stdout
    assert int(counts[2]) >= 1 and int(counts[3]) >= 1
    [call] = upstream.requests_to("/once-hook")
    assert json.loads(call.body)["items"][0]["key"] == "rss:once-1"
    with TestClient(create_app(settings)) as client:
        page = client.get(f"/v1/actions/{watch['actions'][0]['id']}/activity", headers=headers).json()
    assert [run["state"] for run in page["items"]] == ["succeeded"]
