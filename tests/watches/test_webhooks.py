"""Webhook deliveries against local receivers: every transition of openmagpie's delivery states (pending ->
succeeded, errored, failed), what each does to its run, receivers that hang, redirect or answer 10 MB,
blocked destinations, digests of log and webhook actions, and the deliveries routes."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import transaction
from app.models import WatchActionDelivery
from app.watches.actions import webhook
from app.watches.drain import make_context
from app.watches.run_queue import claim_runs, open_deliveries, record_outcomes, window_of
from tests.conftest import ApiUser
from tests.factories import rss_source
from tests.upstream import Upstream, big_body, respond, slow
from tests.watches.conftest import Drain, Poll, later, make_feed, make_watch, runs_of, serve_items

DELIVERY_KEYS = {
    "id",
    "watch_id",
    "action_id",
    "delivery",
    "method",
    "state",
    "attempt",
    "item_count",
    "http_status",
    "target_host",
    "error",
    "created_at",
    "started_at",
    "completed_at",
}


def deliveries_of(db: Session, action_id: str) -> list[WatchActionDelivery]:
    db.expire_all()
    query = select(WatchActionDelivery).where(WatchActionDelivery.action_id == action_id)
    return list(db.scalars(query.order_by(WatchActionDelivery.id)))


def one_item_hook(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, **config: Any
) -> tuple[dict[str, Any], datetime]:
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    action = {"kind": "webhook", "config": {"url": upstream.url("/hook?token=abc"), **config}}
    watch = make_watch(client, api_user.headers, [feed["id"]], [action])
    serve_items(upstream, [("a", "One")])
    at = later(minutes=1)
    poll(at=at)
    return watch, at


def test_a_2xx_delivery_succeeds_and_is_recorded_without_secrets(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    upstream.serve("/hook", "", 204)
    watch, at = one_item_hook(client, api_user, upstream, poll, method="PATCH", headers={"X-Key": "k-123"})
    action_id = watch["actions"][0]["id"]
    drain(at=at)
    [delivery] = deliveries_of(db, action_id)
    assert delivery.state == "succeeded" and delivery.http_status == 204 and delivery.attempt == 1
    assert delivery.target_host == f"127.0.0.1:{upstream.port}" and delivery.item_count == 1
    assert delivery.method == "PATCH" and delivery.delivery == "instant"
    [run] = runs_of(db, action_id)
    assert run.state == "succeeded" and run.result == {"http_status": 204} and run.delivery_id == delivery.id
    [call] = upstream.requests_to("/hook")
    assert call.method == "PATCH" and call.query == {"token": ["abc"]} and call.headers["x-key"] == "k-123"
    listed = client.get(f"/v1/actions/{action_id}/deliveries", headers=api_user.headers)
    assert listed.status_code == 200
    [wire] = listed.json()["items"]
    assert set(wire) == DELIVERY_KEYS and listed.json()["next_cursor"] is None
    assert wire["state"] == "succeeded" and wire["target_host"] == f"127.0.0.1:{upstream.port}"
    view = client.get(f"/v1/action-deliveries/{wire['id']}", headers=api_user.headers).json()
    assert view["request_payload"] == json.loads(call.body)
    assert "k-123" not in json.dumps(view) and "token" not in json.dumps(view)
    assert client.get(f"/v1/action-deliveries/{wire['id']}", headers=api_user.headers).status_code == 200
    assert (
        client.get("/v1/action-deliveries/01ARZ3NDEKTSV4RRFFQ69G5FAV", headers=api_user.headers).status_code
        == 404
    )
    run_view = client.get(f"/v1/action-activity/{run.id}", headers=api_user.headers).json()
    assert run_view["run"]["result"] == {"http_status": 204}


@pytest.mark.parametrize(
    ("status", "delivery_state", "run_state"),
    [
        (500, "failed", "failed"),
        (503, "failed", "failed"),
        (408, "failed", "failed"),
        (429, "failed", "failed"),
        (404, "errored", "errored"),
        (400, "errored", "errored"),
        (410, "errored", "errored"),
        (301, "errored", "errored"),
        (302, "errored", "errored"),
        (307, "errored", "errored"),
    ],
)
def test_the_answer_decides_the_delivery_and_the_run(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    poll: Poll,
    drain: Drain,
    db: Session,
    status: int,
    delivery_state: str,
    run_state: str,
) -> None:
    upstream.route("/hook", respond("no", status, {"Location": upstream.url("/elsewhere")}))
    upstream.serve("/elsewhere", "ok", 200)
    watch, at = one_item_hook(client, api_user, upstream, poll)
    action_id = watch["actions"][0]["id"]
    drain(at=at)
    [delivery] = deliveries_of(db, action_id)
    assert delivery.state == delivery_state and delivery.http_status == status
    assert str(status) in delivery.error and delivery.completed_at is not None
    [run] = runs_of(db, action_id)
    assert run.state == run_state and run.error == delivery.error
    assert upstream.requests_to("/elsewhere") == []  # redirects are never followed
    if run_state == "errored":
        assert run.completed_at is not None
        assert drain(at=at + timedelta(minutes=5)) == 0
        return
    # A failed delivery: the run is retried, each attempt with a new delivery row, then given up.
    drain(at=at + timedelta(seconds=11))
    drain(at=at + timedelta(seconds=80))
    rows = deliveries_of(db, action_id)
    assert [d.attempt for d in rows] == [1, 2, 3] and {d.state for d in rows} == {"failed"}
    [run] = runs_of(db, action_id)
    assert run.state == "failed" and run.attempts == 3 and run.completed_at is not None
    failed = client.get(
        f"/v1/actions/{action_id}/deliveries?state=failed&limit=2", headers=api_user.headers
    ).json()
    assert [d["attempt"] for d in failed["items"]] == [3, 2] and failed["next_cursor"] == rows[1].id
    rest = client.get(
        f"/v1/actions/{action_id}/deliveries?state=failed&limit=2&after={failed['next_cursor']}",
        headers=api_user.headers,
    ).json()
    assert [d["attempt"] for d in rest["items"]] == [1] and rest["next_cursor"] is None
    assert client.get(
        f"/v1/actions/{action_id}/deliveries?state=succeeded", headers=api_user.headers
    ).json() == {
        "items": [],
        "next_cursor": None,
    }


def test_a_receiver_that_recovers_gets_the_item_on_the_retry(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    upstream.serve("/hook", "busy", 503)
    watch, at = one_item_hook(client, api_user, upstream, poll)
    action_id = watch["actions"][0]["id"]
    drain(at=at)
    upstream.serve("/hook", "ok", 200)
    drain(at=at + timedelta(seconds=11))
    assert [d.state for d in deliveries_of(db, action_id)] == ["failed", "succeeded"]
    [run] = runs_of(db, action_id)
    assert run.state == "succeeded" and run.attempts == 2 and run.error == ""


def test_a_receiver_that_hangs_is_a_failed_delivery_and_the_queue_goes_on(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    upstream.route("/hook", slow(4.0, respond("late", 200)))
    watch, at = one_item_hook(client, api_user, upstream, poll)
    action_id = watch["actions"][0]["id"]
    drain(at=at)
    [delivery] = deliveries_of(db, action_id)
    assert delivery.state == "failed" and delivery.http_status is None and "in time" in delivery.error
    [run] = runs_of(db, action_id)
    assert run.state == "failed" and run.completed_at is None


def test_a_receiver_that_answers_10_mb_is_judged_by_its_status(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    upstream.route("/hook", big_body(10 * 1024 * 1024, declare_length=False))
    watch, at = one_item_hook(client, api_user, upstream, poll)
    action_id = watch["actions"][0]["id"]
    drain(at=at)
    [delivery] = deliveries_of(db, action_id)
    assert delivery.state == "succeeded" and delivery.http_status == 200
    assert "larger than" in delivery.error
    [run] = runs_of(db, action_id)
    assert run.state == "succeeded"


def test_an_unreachable_receiver_is_a_failed_delivery(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    action = {"kind": "webhook", "config": {"url": "http://127.0.0.1:9/hook"}}
    watch = make_watch(client, api_user.headers, [feed["id"]], [action])
    serve_items(upstream, [("a", "One")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    [delivery] = deliveries_of(db, watch["actions"][0]["id"])
    assert delivery.state == "failed" and "failed" in delivery.error


def test_a_blocked_destination_is_errored_and_never_retried(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    upstream.serve("/hook", "ok", 200)
    watch, at = one_item_hook(client, api_user, upstream, poll)
    action_id = watch["actions"][0]["id"]
    drain(at=at, outbound_allow_private=False)
    [delivery] = deliveries_of(db, action_id)
    assert delivery.state == "errored" and "blocked destination" in delivery.error
    [run] = runs_of(db, action_id)
    assert run.state == "errored" and run.completed_at is not None
    assert upstream.requests_to("/hook") == []


def test_digest_webhooks_batch_a_window_into_one_request(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    upstream.serve("/hook", "ok", 200)
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    action = {
        "kind": "webhook",
        "config": {"url": upstream.url("/hook"), "delivery": "digest", "digest_interval_seconds": 3600},
    }
    watch = make_watch(client, api_user.headers, [feed["id"]], [action, {"kind": "log", "config": {}}])
    action_id = watch["actions"][0]["id"]
    serve_items(upstream, [("a", "One"), ("b", "Two"), ("c", "Three")])
    at = later(minutes=1)
    poll(at=at)
    since, until = window_of(at, 3600)
    drain(at=at)
    runs = runs_of(db, action_id)
    # Put in the window, not attempted: they wait for its end.
    assert {r.state for r in runs} == {"pending"} and {r.attempts for r in runs} == {0}
    assert {r.scheduled_at for r in runs} == {until}
    assert upstream.requests_to("/hook") == []
    assert drain(at=until - timedelta(seconds=1)) == 0
    drain(at=until + timedelta(seconds=1))
    [call] = upstream.requests_to("/hook")
    body = json.loads(call.body)
    assert body["delivery"] == "digest"
    assert body["window"] == {"since": iso_z(since), "until": iso_z(until)}
    assert sorted(i["key"].split(":")[1] for i in body["items"]) == ["a", "b", "c"]
    [delivery] = deliveries_of(db, action_id)
    assert delivery.delivery == "digest" and delivery.item_count == 3 and delivery.state == "succeeded"
    assert {r.state for r in runs_of(db, action_id)} == {"succeeded"}
    # Each item goes on down the chain.
    assert len(runs_of(db, watch["actions"][1]["id"])) == 3


def test_digest_logs_write_one_line_per_window(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    poll: Poll,
    drain: Drain,
    db: Session,
    caplog: pytest.LogCaptureFixture,
) -> None:
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    action = {
        "kind": "log",
        "config": {"delivery": "digest", "digest_interval_seconds": 600, "prefix": "[dig]"},
    }
    watch = make_watch(client, api_user.headers, [feed["id"]], [action])
    serve_items(upstream, [("a", "One"), ("b", "Two")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    end = window_of(at, 600)[1]
    with caplog.at_level(logging.INFO, logger="tidings.watches.log"):
        drain(at=end)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[dig]")]
    assert len(lines) == 1
    body = json.loads(lines[0].removeprefix("[dig] "))
    assert body["delivery"] == "digest" and len(body["items"]) == 2
    runs = runs_of(db, watch["actions"][0]["id"])
    assert {r.state for r in runs} == {"succeeded"} and {r.result["rendered"] for r in runs} == {lines[0]}


def test_a_digest_with_a_failing_receiver_is_retried_as_a_whole(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    upstream.serve("/hook", "down", 502)
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    action = {
        "kind": "webhook",
        "config": {"url": upstream.url("/hook"), "delivery": "digest", "digest_interval_seconds": 60},
    }
    watch = make_watch(client, api_user.headers, [feed["id"]], [action])
    action_id = watch["actions"][0]["id"]
    serve_items(upstream, [("a", "One"), ("b", "Two")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    end = window_of(at, 60)[1]
    drain(at=end)
    assert {r.state for r in runs_of(db, action_id)} == {"failed"}
    upstream.serve("/hook", "ok", 200)
    drain(at=end + timedelta(seconds=11))
    first, second = deliveries_of(db, action_id)
    assert (first.state, first.item_count, first.attempt) == ("failed", 2, 1)
    assert (second.state, second.item_count, second.attempt) == ("succeeded", 2, 2)
    assert {r.state for r in runs_of(db, action_id)} == {"succeeded"}


def test_bad_delivery_filters_are_400(client: TestClient, api_user: ApiUser) -> None:
    watch = make_watch(client, api_user.headers, [], [{"kind": "log", "config": {}}])
    action_id = watch["actions"][0]["id"]
    bad = client.get(f"/v1/actions/{action_id}/deliveries?state=gated", headers=api_user.headers)
    assert bad.status_code == 400 and "state" in bad.json()["detail"]
    bad = client.get(f"/v1/actions/{action_id}/deliveries?after=zzz", headers=api_user.headers)
    assert bad.status_code == 400 and "after" in bad.json()["detail"]


def iso_z(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def test_a_delivery_is_pending_while_its_call_is_made(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    poll: Poll,
    db: Session,
    settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    """The drain's steps one at a time: claim, the pending row (committed before the call), the call,
    the outcome."""
    upstream.serve("/hook", "ok", 200)
    watch, at = one_item_hook(client, api_user, upstream, poll)
    action_id = watch["actions"][0]["id"]
    with transaction(session_factory) as session:
        runs = claim_runs(session, at, 10, 10).runs
    prepared, errored = webhook.prepare(runs, at)
    assert prepared is not None and errored == []
    with transaction(session_factory) as session:
        open_deliveries(session, [prepared.row])
    [pending] = client.get(f"/v1/actions/{action_id}/deliveries", headers=api_user.headers).json()["items"]
    assert (
        pending["state"] == "pending" and pending["http_status"] is None and pending["completed_at"] is None
    )
    assert upstream.requests_to("/hook") == []

    async def call() -> Any:
        context = make_context(settings)
        try:
            return await webhook.send(context, prepared, lambda: at)
        finally:
            await context.webhook_http.aclose()
            await context.enrich_http.aclose()
            await context.engines.aclose()

    outcomes, delivery = asyncio.run(call())
    with transaction(session_factory) as session:
        assert record_outcomes(session, outcomes, [delivery], at) == 1
    [done] = client.get(f"/v1/actions/{action_id}/deliveries", headers=api_user.headers).json()["items"]
    assert done["id"] == pending["id"] and done["state"] == "succeeded" and done["http_status"] == 200


def test_a_blocked_destination_error_never_shows_the_url_path_or_query(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    """Webhook secrecy covers every response: the error text of a delivery and of its run names the
    destination as responses show the URL (scheme, host, port), never the path and query."""
    watch, at = one_item_hook(client, api_user, upstream, poll)
    action_id = watch["actions"][0]["id"]
    drain(at=at, outbound_allow_private=False)
    [delivery] = deliveries_of(db, action_id)
    [run] = runs_of(db, action_id)
    assert delivery.state == "errored" and run.state == "errored"
    for text in (delivery.error, run.error):
        assert "token=abc" not in text and "/hook" not in text, text
        assert f"http://127.0.0.1:{upstream.port}/***" in text and "non-public" in text, text
    for path in (
        f"/v1/actions/{action_id}/deliveries",
        f"/v1/action-deliveries/{delivery.id}",
        f"/v1/actions/{action_id}/activity",
        f"/v1/action-activity/{run.id}",
    ):
        response = client.get(path, headers=api_user.headers)
        assert response.status_code == 200 and "token=abc" not in response.text, (path, response.text)
