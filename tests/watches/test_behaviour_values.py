"""Behaviour values a watch client sets where openmagpie states no bound: `digest_interval_seconds` has the
seed's minimum of 0 and no maximum (up to the largest integer a behaviour value takes), and an action's
`rank` is any integer, clamped to a place in the chain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.watches.run_queue import window_of
from tests.conftest import ApiUser
from tests.factories import rss_source
from tests.upstream import Upstream
from tests.watches.conftest import Drain, Poll, later, make_feed, make_watch, runs_of, serve_items

MAX_INTEGER = 2**31 - 1
LOG = {"kind": "log", "config": {}}


def digest_log(interval: int) -> dict[str, Any]:
    return {"kind": "log", "config": {"delivery": "digest", "digest_interval_seconds": interval}}


@pytest.mark.parametrize("interval", [31 * 24 * 3600 + 1, 365 * 24 * 3600, MAX_INTEGER])
def test_a_digest_interval_past_a_month_is_taken_and_returned(
    client: TestClient, api_user: ApiUser, interval: int
) -> None:
    # Refused above 31 days before: openmagpie states only the minimum, 0.
    watch = make_watch(client, api_user.headers, [], [digest_log(interval)])
    assert watch["actions"][0]["config"]["digest_interval_seconds"] == interval
    added = client.post(
        f"/v1/watches/{watch['id']}/actions",
        json={
            "kind": "webhook",
            "config": {
                "url": "https://hooks.example.com/x",
                "delivery": "digest",
                "digest_interval_seconds": interval,
            },
        },
        headers=api_user.headers,
    )
    assert added.status_code == 201, added.text
    assert added.json()["action"]["config"]["digest_interval_seconds"] == interval
    read = client.get(f"/v1/watches/{watch['id']}", headers=api_user.headers).json()
    assert [a["config"]["digest_interval_seconds"] for a in read["actions"]] == [interval, interval]


@pytest.mark.parametrize("interval", [-1, MAX_INTEGER + 1])
def test_a_digest_interval_below_0_or_past_the_integer_column_is_400(
    client: TestClient, api_user: ApiUser, interval: int
) -> None:
    response = client.post(
        "/v1/watches", json={"name": "w", "actions": [digest_log(interval)]}, headers=api_user.headers
    )
    assert response.status_code == 400
    assert "actions[0].config.digest_interval_seconds" in response.json()["detail"]


def test_the_longest_digest_window_parks_its_runs_without_overflow(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    watch = make_watch(client, api_user.headers, [feed["id"]], [digest_log(MAX_INTEGER)])
    serve_items(upstream, [("a", "One")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    since, until = window_of(at, MAX_INTEGER)
    # Windows are aligned to the Unix epoch: this one runs from 1970 to 2038.
    assert since == datetime(1970, 1, 1, tzinfo=UTC)
    assert until == since + timedelta(seconds=MAX_INTEGER)
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "pending" and run.attempts == 0 and run.scheduled_at == until
    assert drain(at=until + timedelta(seconds=1)) == 1
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "succeeded"


def test_any_rank_is_clamped_to_a_place_in_the_chain(client: TestClient, api_user: ApiUser) -> None:
    # Refused outside 0 to 10,000 before: openmagpie says only "integer or null".
    watch = make_watch(client, api_user.headers, [], [LOG, LOG])
    path = f"/v1/watches/{watch['id']}/actions"
    first = client.post(path, json={**LOG, "rank": -5}, headers=api_user.headers)
    assert first.status_code == 201, first.text
    assert first.json()["action"]["rank"] == 0
    last = client.post(path, json={**LOG, "rank": 10**6}, headers=api_user.headers)
    assert last.status_code == 201 and last.json()["action"]["rank"] == 3
    # The largest integer a JSON body carries (orjson reads wider ones as numbers with a fraction).
    huge = client.post(path, json={**LOG, "rank": 2**63 - 1}, headers=api_user.headers)
    assert huge.status_code == 201 and huge.json()["action"]["rank"] == 4
    dry = client.post(f"{path}?dry_run=1", json={**LOG, "rank": -(2**63)}, headers=api_user.headers)
    assert dry.status_code == 200 and dry.json()["action"]["rank"] == 0
    chain = [a["id"] for a in client.get(path, headers=api_user.headers).json()["items"]]
    assert chain[0] == first.json()["action"]["id"] and chain[3] == last.json()["action"]["id"]

    moved = client.put(f"/v1/actions/{chain[4]}", json={**LOG, "rank": -1}, headers=api_user.headers)
    assert moved.status_code == 200 and moved.json()["action"]["rank"] == 0
    moved = client.put(f"/v1/actions/{chain[4]}", json={**LOG, "rank": 2**40}, headers=api_user.headers)
    assert moved.status_code == 200 and moved.json()["action"]["rank"] == 4
    ranks = [a["rank"] for a in client.get(path, headers=api_user.headers).json()["items"]]
    assert ranks == [0, 1, 2, 3, 4]
