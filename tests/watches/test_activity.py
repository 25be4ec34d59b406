"""An action's activity: runs newest first by cursor, the `state` filter, the side maps of feeds and
items, the summary with its windows and non-overlapping buckets, and one run in full."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, update
from sqlalchemy.orm import Session
from time_machine import TimeMachineFixture

from app.kit.time import iso, utcnow
from app.models import FeedItem, WatchActionRun
from tests.conftest import NOON, ApiUser
from tests.factories import rss_source
from tests.upstream import Upstream
from tests.watches.conftest import (
    Drain,
    Poll,
    activity,
    later,
    make_feed,
    make_watch,
    serve_items,
)

FILTER = {"kind": "semantic_filter", "config": {"instructions": "x", "fetch_external_content": False}}
RUN_KEYS = {
    "id",
    "watch_id",
    "action_id",
    "feed_item_id",
    "kind",
    "state",
    "error",
    "result",
    "attempts",
    "created_at",
    "scheduled_at",
    "started_at",
    "completed_at",
}


def filtered_watch(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, titles: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    feed = make_feed(client, api_user.headers, [rss_source(upstream)], name="Tech")
    watch = make_watch(client, api_user.headers, [feed["id"]], [FILTER])
    serve_items(upstream, [(f"g{i}", title) for i, title in enumerate(titles)])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    return feed, watch


def test_activity_pages_filters_and_describes_items(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain
) -> None:
    titles = [f"Item {i} score={'0.9' if i % 2 else '0.1'}" for i in range(5)]
    feed, watch = filtered_watch(client, api_user, upstream, poll, drain, titles)
    action_id = watch["actions"][0]["id"]
    page = activity(client, api_user.headers, action_id, limit=2)
    assert set(page) == {"items", "next_cursor", "action", "feeds", "feed_items", "summary"}
    assert len(page["items"]) == 2 and page["next_cursor"] == page["items"][1]["id"]
    assert all(set(run) == RUN_KEYS for run in page["items"])
    assert page["action"]["id"] == action_id and page["action"]["kind"] == "semantic_filter"
    assert page["feeds"] == {feed["id"]: {"id": feed["id"], "name": "Tech"}}
    for run in page["items"]:
        item = page["feed_items"][run["feed_item_id"]]
        assert set(item) == {"feed_id", "title", "url", "external_url", "source_label", "occurred_at"}
        assert item["feed_id"] == feed["id"] and item["source_label"] == "Local"
        assert item["title"].startswith("Item ") and item["url"].startswith("https://example.com/posts/")
    summary = page["summary"]
    assert summary["window"] == "7d" and summary["until"] is None
    assert summary["evaluated"] == {"succeeded": 2, "gated": 3, "failed": 0, "errored": 0, "skipped": 0}
    second = activity(client, api_user.headers, action_id, limit=2, after=page["next_cursor"])
    assert second["summary"] is None and len(second["items"]) == 2
    third = activity(client, api_user.headers, action_id, limit=2, after=second["next_cursor"])
    assert len(third["items"]) == 1 and third["next_cursor"] is None
    ids = [r["id"] for r in page["items"] + second["items"] + third["items"]]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 5
    gated = activity(client, api_user.headers, action_id, state="gated")
    assert len(gated["items"]) == 3 and {r["state"] for r in gated["items"]} == {"gated"}
    assert gated["items"][0]["result"]["passed"] is False
    assert activity(client, api_user.headers, action_id, state="errored")["items"] == []


def test_bad_query_values_are_400(client: TestClient, api_user: ApiUser) -> None:
    watch = make_watch(client, api_user.headers, [], [FILTER])
    path = f"/v1/actions/{watch['actions'][0]['id']}/activity"
    for query, name in [("state=done", "state"), ("window=1y", "window"), ("after=nope", "after")]:
        response = client.get(f"{path}?{query}", headers=api_user.headers)
        assert response.status_code == 400, query
        assert response.json()["error"] == "validation_error" and name in response.json()["detail"]
    for window in ("24h", "yesterday", "7d", "30d"):
        summary = client.get(f"{path}?window={window}", headers=api_user.headers).json()["summary"]
        assert summary["window"] == window
    assert (
        client.get("/v1/actions/01ARZ3NDEKTSV4RRFFQ69G5FAV/activity", headers=api_user.headers).status_code
        == 404
    )
    assert (
        client.get("/v1/action-activity/01ARZ3NDEKTSV4RRFFQ69G5FAV", headers=api_user.headers).status_code
        == 404
    )
    assert client.get("/v1/action-activity/not-an-id", headers=api_user.headers).status_code == 404


# At NOON: "an hour ago" is today, and yesterday's noon is in "yesterday" but not in the last 24 hours.
@pytest.mark.usefixtures("clock")
def test_summary_windows_count_by_completion_and_buckets_do_not_overlap(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    _, watch = filtered_watch(client, api_user, upstream, poll, drain, [f"T{i} score=0.9" for i in range(7)])
    action_id = watch["actions"][0]["id"]
    runs = [r["id"] for r in activity(client, api_user.headers, action_id)["items"]]
    now = utcnow()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    assert midnight == NOON.replace(hour=0)
    moments = {
        runs[0]: now - timedelta(hours=1),  # 24h, 7d, 30d
        runs[1]: midnight - timedelta(hours=12),  # yesterday, 7d, 30d
        runs[2]: now - timedelta(days=3),  # 7d, 30d
        runs[3]: now - timedelta(days=20),  # 30d
    }
    for run_id, moment in moments.items():
        db.execute(update(WatchActionRun).where(WatchActionRun.id == run_id).values(completed_at=moment))
    # A failed run with attempts left is retrying (no completion time); one with none left is evaluated.
    db.execute(
        update(WatchActionRun).where(WatchActionRun.id == runs[4]).values(state="failed", completed_at=None)
    )
    db.execute(
        update(WatchActionRun).where(WatchActionRun.id == runs[5]).values(state="failed", completed_at=now)
    )
    db.execute(
        update(WatchActionRun).where(WatchActionRun.id == runs[6]).values(state="pending", completed_at=None)
    )
    db.commit()

    def summary(window: str) -> dict[str, Any]:
        found: dict[str, Any] = activity(client, api_user.headers, action_id, window=window)["summary"]
        return found

    day = summary("24h")
    assert day["evaluated"]["succeeded"] + day["evaluated"]["failed"] == 2
    assert (day["retrying"], day["pending"], day["running"]) == (1, 1, 0)
    yesterday = summary("yesterday")
    assert yesterday["since"] == iso(midnight - timedelta(days=1)) and yesterday["until"] == iso(midnight)
    assert yesterday["evaluated"]["succeeded"] == 1 and yesterday["evaluated"]["failed"] == 0
    assert summary("7d")["evaluated"] == {"succeeded": 3, "gated": 0, "failed": 1, "errored": 0, "skipped": 0}
    month = summary("30d")
    assert month["evaluated"]["succeeded"] == 4 and month["evaluated"]["failed"] == 1
    total = sum(month["evaluated"].values()) + month["retrying"] + month["pending"] + month["running"]
    assert total == 7


@pytest.mark.parametrize(
    ("moment", "since", "until"),
    [
        ("2027-01-01T00:00:10Z", "2026-12-31T00:00:00.000000Z", "2027-01-01T00:00:00.000000Z"),
        ("2026-12-31T23:59:50Z", "2026-12-30T00:00:00.000000Z", "2026-12-31T00:00:00.000000Z"),
        ("2027-01-31T23:59:59Z", "2027-01-30T00:00:00.000000Z", "2027-01-31T00:00:00.000000Z"),
    ],
)
def test_yesterday_is_the_utc_day_before_the_one_the_clock_is_in(
    client: TestClient, api_user: ApiUser, clock: TimeMachineFixture, moment: str, since: str, until: str
) -> None:
    clock.move_to(datetime.fromisoformat(moment), tick=False)
    watch = make_watch(client, api_user.headers, [], [FILTER])
    action_id = watch["actions"][0]["id"]
    yesterday = activity(client, api_user.headers, action_id, window="yesterday")["summary"]
    assert (yesterday["since"], yesterday["until"]) == (since, until)
    day = activity(client, api_user.headers, action_id, window="24h")["summary"]
    assert day["since"] == iso(datetime.fromisoformat(moment) - timedelta(hours=24))


def test_a_run_in_full_and_after_its_item_was_pruned(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    feed, watch = filtered_watch(client, api_user, upstream, poll, drain, ["Only score=0.95"])
    [run] = activity(client, api_user.headers, watch["actions"][0]["id"])["items"]
    view = client.get(f"/v1/action-activity/{run['id']}", headers=api_user.headers).json()
    assert set(view) == {"run", "action", "feed", "feed_item"}
    assert view["run"] == run
    assert view["feed"] == {"id": feed["id"], "name": "Tech"}
    assert view["feed_item"]["title"] == "Only score=0.95"
    assert view["action"]["id"] == watch["actions"][0]["id"]
    db.execute(delete(FeedItem).where(FeedItem.id == run["feed_item_id"]))
    db.commit()
    pruned = client.get(f"/v1/action-activity/{run['id']}/", headers=api_user.headers).json()
    assert pruned["feed_item"] is None and pruned["run"] == run
    page = activity(client, api_user.headers, watch["actions"][0]["id"])
    assert page["feed_items"] == {} and page["items"] == [run]


def test_a_backfill_previews_runs_and_is_listed(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain
) -> None:
    _, watch = filtered_watch(client, api_user, upstream, poll, drain, [f"Item {i}" for i in range(3)])
    action_id = watch["actions"][0]["id"]
    url = f"/v1/actions/{action_id}/backfill"
    window = {"completed_since": "24h", "replace": True}
    preview = client.post(url, params={"dry_run": "true"}, json=window, headers=api_user.headers)
    assert preview.status_code == 200, preview.text
    # The keys in the documented order, as the CLI prints them.
    assert list(preview.json()) == [
        "dry_run",
        "source_action_id",
        "source_is_head",
        "replace",
        "matched",
        "present",
        "pruned",
        "would_delete",
        "would_enqueue",
    ]
    assert preview.json()["source_is_head"] is True and preview.json()["would_enqueue"] == 3
    done = client.post(url, json=window, headers=api_user.headers)
    assert done.status_code == 201, done.text
    job = done.json()
    assert list(job)[:3] == ["id", "state", "target_action_id"] and list(job)[-1] == "completed_at"
    assert (job["state"], job["target_action_id"], job["enqueued"]) == ("done", action_id, 3)
    assert job["created_at"].endswith("Z") and job["occurred_since"] is None
    listed = client.get("/v1/action-backfills", headers=api_user.headers).json()
    assert listed == {"items": [job], "next_cursor": None}
    one = client.get(f"/v1/action-backfills/{job['id']}", headers=api_user.headers)
    assert one.json() == job
