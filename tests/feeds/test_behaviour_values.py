"""Behaviour values a feed client sets (`poll_interval_seconds`, `data.retention_days`): any positive
integer openmagpie allows is taken and returned as given, up to the database's integer column; the
operator's floor (TIDINGS_FEED_MIN_POLL_SECONDS) is applied by the poller, never as a 400; and the
largest values do not overflow the date arithmetic of polling, backoff and retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import transaction
from app.feeds.poll_queue import backoff, lower_bound, prune_all, retention_start
from app.kit.time import utcnow
from app.models import Feed, FeedItem, Source
from tests.conftest import ApiUser
from tests.factories import rss_source
from tests.feeds.conftest import Poll, items_of, make_feed, rss
from tests.upstream import Upstream

MAX_INTEGER = 2**31 - 1


def feed_row(db: Session, feed_id: str) -> Feed:
    db.expire_all()
    feed = db.get(Feed, feed_id)
    assert feed is not None
    return feed


# --- taken and returned as the client set them (each was refused before) ----------------------------


@pytest.mark.parametrize("interval", [1, 5, 30, 59, 7 * 24 * 3600 + 1, MAX_INTEGER])
def test_any_positive_poll_interval_is_taken_and_returned(
    client: TestClient, api_user: ApiUser, interval: int
) -> None:
    # Refused below 60 and above 604,800 seconds before: openmagpie sets no bound.
    created = client.post(
        "/v1/feeds", json={"name": "Fast", "poll_interval_seconds": interval}, headers=api_user.headers
    )
    assert created.status_code == 201, created.text
    assert created.json()["poll_interval_seconds"] == interval
    feed_id = created.json()["id"]
    read = client.get(f"/v1/feeds/{feed_id}", headers=api_user.headers).json()
    assert read["poll_interval_seconds"] == interval
    listed = client.get("/v1/feeds", headers=api_user.headers).json()["items"]
    assert [f["poll_interval_seconds"] for f in listed if f["id"] == feed_id] == [interval]
    edited = client.put(
        f"/v1/feeds/{feed_id}", json={"name": "Fast", "poll_interval_seconds": 5}, headers=api_user.headers
    )
    assert edited.status_code == 200 and edited.json()["poll_interval_seconds"] == 5
    dry = client.post(
        "/v1/feeds?dry_run=1",
        json={"name": "Dry", "poll_interval_seconds": interval},
        headers=api_user.headers,
    )
    assert dry.status_code == 200 and dry.json()["poll_interval_seconds"] == interval


@pytest.mark.parametrize("days", [1, 366, 10_000, 3_000_000, MAX_INTEGER])
def test_any_positive_retention_is_taken_and_returned(
    client: TestClient, api_user: ApiUser, days: int
) -> None:
    # Refused above 365 days before: openmagpie sets no bound.
    body = {"name": "Kept", "data": {"retention_days": days}}
    created = client.post("/v1/feeds", json=body, headers=api_user.headers)
    assert created.status_code == 201, created.text
    assert created.json()["data"]["retention_days"] == days
    read = client.get(f"/v1/feeds/{created.json()['id']}", headers=api_user.headers).json()
    assert read["data"]["retention_days"] == days


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"poll_interval_seconds": 0}, "poll_interval_seconds"),
        ({"poll_interval_seconds": -5}, "poll_interval_seconds"),
        ({"poll_interval_seconds": MAX_INTEGER + 1}, "poll_interval_seconds"),
        ({"poll_interval_seconds": 10**30}, "poll_interval_seconds"),
        ({"data": {"retention_days": 0}}, "data.retention_days"),
        ({"data": {"retention_days": MAX_INTEGER + 1}}, "data.retention_days"),
    ],
)
def test_what_is_not_a_positive_integer_that_fits_is_still_400(
    client: TestClient, api_user: ApiUser, body: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/feeds", json={"name": "x", **body}, headers=api_user.headers)
    assert response.status_code == 400, response.text
    assert field in response.json()["detail"]


# --- the operator's floor -----------------------------------------------------------------------------


def test_a_5_second_feed_is_polled_at_the_floor_and_at_5_seconds_without_one(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, db: Session
) -> None:
    upstream.serve("/feed.xml", rss([]))
    upstream.serve("/other.xml", rss([]))
    floored = make_feed(client, api_user.headers, [rss_source(upstream)], poll_interval_seconds=5)
    assert floored["poll_interval_seconds"] == 5
    t0 = utcnow() + timedelta(seconds=1)

    # The default floor: 60 s, whatever the feed asks.
    assert poll(at=t0) == 1
    assert feed_row(db, floored["id"]).next_poll_at == t0 + timedelta(seconds=60)
    for seconds in (5, 10, 30, 59):
        assert poll(at=t0 + timedelta(seconds=seconds)) == 0
    assert poll(at=t0 + timedelta(seconds=60)) == 1
    assert len(upstream.requests_to("/feed.xml")) == 2
    # The API still says what the client set.
    read = client.get(f"/v1/feeds/{floored['id']}", headers=api_user.headers).json()
    assert read["poll_interval_seconds"] == 5
    client.patch(f"/v1/feeds/{floored['id']}", json={"is_active": False}, headers=api_user.headers)

    # Floor 0: the feed's own 5 s.
    own = make_feed(client, api_user.headers, [rss_source(upstream, "/other.xml")], poll_interval_seconds=5)
    t1 = utcnow() + timedelta(seconds=1)
    assert poll(at=t1, feed_min_poll_seconds=0) == 1
    assert feed_row(db, own["id"]).next_poll_at == t1 + timedelta(seconds=5)
    assert poll(at=t1 + timedelta(seconds=4), feed_min_poll_seconds=0) == 0
    for step in range(1, 5):
        assert poll(at=t1 + timedelta(seconds=5 * step), feed_min_poll_seconds=0) == 1
    assert len(upstream.requests_to("/other.xml")) == 5

    # A feed slower than the floor keeps its own pace.
    slow = make_feed(client, api_user.headers, [rss_source(upstream, "/slow.xml")], poll_interval_seconds=600)
    upstream.serve("/slow.xml", rss([]))
    t2 = utcnow() + timedelta(seconds=1)
    poll(at=t2, feed_min_poll_seconds=120)
    assert feed_row(db, slow["id"]).next_poll_at == t2 + timedelta(seconds=600)


def test_resuming_or_editing_a_feed_schedules_it_by_the_floor_too(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, db: Session
) -> None:
    # The app's settings keep the default floor of 60 s.
    upstream.serve("/feed.xml", rss([]))
    feed = make_feed(client, api_user.headers, [rss_source(upstream)], poll_interval_seconds=5)
    polled_at = utcnow() + timedelta(seconds=1)
    assert poll(at=polled_at) == 1
    client.patch(f"/v1/feeds/{feed['id']}", json={"is_active": False}, headers=api_user.headers)
    client.patch(f"/v1/feeds/{feed['id']}", json={"is_active": True}, headers=api_user.headers)
    assert feed_row(db, feed["id"]).next_poll_at == polled_at + timedelta(seconds=60)
    edited = client.put(
        f"/v1/feeds/{feed['id']}", json={"name": "Feed", "poll_interval_seconds": 7}, headers=api_user.headers
    )
    assert edited.json()["poll_interval_seconds"] == 7
    assert feed_row(db, feed["id"]).next_poll_at == polled_at + timedelta(seconds=60)


def test_failing_sources_back_off_from_the_floored_interval(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, db: Session
) -> None:
    upstream.serve("/feed.xml", "down", 503)
    feed = make_feed(client, api_user.headers, [rss_source(upstream)], poll_interval_seconds=5)
    at = utcnow() + timedelta(seconds=1)
    poll(at=at)
    db.expire_all()
    [source] = db.scalars(select(Source).where(Source.feed_id == feed["id"])).all()
    # Twice the interval after one failure: twice the 60 s floor, not twice 5 s.
    assert source.retry_at == at + timedelta(seconds=120)


# --- the largest values do not overflow ------------------------------------------------------------------


def test_the_largest_interval_and_retention_poll_prune_and_back_off_without_error(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    poll: Poll,
    db: Session,
    session_factory: sessionmaker[Session],
) -> None:
    now = utcnow()
    upstream.serve("/feed.xml", rss([("a", "A", now + timedelta(minutes=1))]))
    feed = make_feed(
        client,
        api_user.headers,
        [rss_source(upstream)],
        poll_interval_seconds=MAX_INTEGER,
        data={"retention_days": MAX_INTEGER},
    )
    at = now + timedelta(minutes=2)
    assert poll(at=at) == 1
    assert [i["external_id"] for i in items_of(client, api_user.headers, feed["id"])] == ["a"]
    row = feed_row(db, feed["id"])
    assert row.next_poll_at == at + timedelta(seconds=MAX_INTEGER)  # about 68 years on
    # Retention of 2^31 days keeps everything (its start would be before year 1).
    with transaction(session_factory) as session:
        assert prune_all(session, at + timedelta(days=3650)) == 0
    assert db.scalar(select(FeedItem.id).where(FeedItem.feed_id == feed["id"])) is not None
    # The resumed feed is scheduled by its interval from its last poll.
    client.patch(f"/v1/feeds/{feed['id']}", json={"is_active": False}, headers=api_user.headers)
    resumed = client.patch(f"/v1/feeds/{feed['id']}", json={"is_active": True}, headers=api_user.headers)
    assert resumed.status_code == 200
    # A failing source backs off by at most its interval: no overflow of 2^31 s times 2^20.
    assert backoff(30, MAX_INTEGER, None) == timedelta(seconds=MAX_INTEGER)
    assert backoff(1, MAX_INTEGER, 10**12) == timedelta(seconds=MAX_INTEGER)
    upstream.serve("/feed.xml", "down", 503)
    assert poll(at=row.next_poll_at) == 1
    db.expire_all()
    [source] = db.scalars(select(Source).where(Source.feed_id == feed["id"])).all()
    assert source.consecutive_failures == 1 and source.retry_at is not None


def test_retention_start_is_year_one_when_the_days_reach_past_it() -> None:
    now = utcnow()
    assert retention_start(now, 30) == now - timedelta(days=30)
    days_since_year_one = (now - now.replace(year=1, month=1, day=1, hour=0, minute=0, second=0)).days
    assert retention_start(now, days_since_year_one - 1).year == 1
    for days in (days_since_year_one, days_since_year_one + 1, 999_999_999, MAX_INTEGER, 10**20):
        start = retention_start(now, days)
        assert start.year == 1 and start.tzinfo == now.tzinfo


def test_a_source_of_a_feed_kept_forever_wants_items_from_its_own_start() -> None:
    now = utcnow()
    source = Source(kind="rss", start_at=now - timedelta(hours=1), last_event_at=None)
    assert lower_bound(source, MAX_INTEGER, now) == now - timedelta(hours=1)


def test_the_floor_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings(_env_file=None).feed_min_poll_seconds == 60  # type: ignore[call-arg]
    monkeypatch.setenv("TIDINGS_FEED_MIN_POLL_SECONDS", "0")
    assert Settings(_env_file=None).feed_min_poll_seconds == 0  # type: ignore[call-arg]
    monkeypatch.setenv("TIDINGS_FEED_MIN_POLL_SECONDS", "-1")
    with pytest.raises(ValidationError):
        Settings(_env_file=None)  # type: ignore[call-arg]
