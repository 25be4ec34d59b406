"""Runs end to end: feed items polled from a local server start each subscribed watch's chain, the drain
performs the actions against a fake OpenAI-compatible engine and local receivers, and every transition
of openmagpie's run states happens: pending -> running -> succeeded (the chain goes on), gated (it stops),
failed (retried after about 10 s and 60 s, then terminal), errored (never retried), skipped (paused),
and a run left running is taken back."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import is_sqlite_url, make_session_factory, make_write_session_factory, transaction
from app.identity.accounts import create_user
from app.kit.ids import new_ulid
from app.kit.time import utcnow
from app.models import Account, Feed, FeedItem, Watch, WatchAction, WatchActionRun, WatchFeed
from app.watches.drain import RunDrain
from app.watches.run_queue import Outcome, claim_runs, enqueue_first_runs, record_outcomes
from tests.conftest import ApiUser
from tests.factories import rss_source
from tests.fake_engine import FakeEngine
from tests.upstream import Upstream
from tests.watches.conftest import (
    Drain,
    Poll,
    activity,
    later,
    make_feed,
    make_watch,
    runs_of,
    serve_items,
)

FILTER = {"kind": "semantic_filter", "config": {"instructions": "Rust news", "fetch_external_content": False}}


def hook(upstream: Upstream, path: str = "/hook", **config: Any) -> dict[str, Any]:
    return {"kind": "webhook", "config": {"url": upstream.url(path), **config}}


def setup_watch(
    client: TestClient, api_user: ApiUser, upstream: Upstream, actions: list[dict[str, Any]], **fields: Any
) -> dict[str, Any]:
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    return make_watch(client, api_user.headers, [feed["id"]], actions, **fields)


def test_the_chain_runs_end_to_end(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    llm: FakeEngine,
    poll: Poll,
    drain: Drain,
    db: Session,
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream.serve("/hook", "ok", 200)
    extract = {
        "kind": "extract",
        "config": {
            "fields": [
                {"name": "lang", "description": "The language"},
                {"name": "version", "description": "The version"},
            ],
            "fetch_external_content": False,
        },
    }
    log_action = {"kind": "log", "config": {"prefix": "[rust]", "include_fields": ["title"]}}
    watch = setup_watch(
        client,
        api_user,
        upstream,
        [
            FILTER,
            extract,
            log_action,
            hook(upstream, headers={"X-Token": "s3cret"}, include_fields=["title", "url"]),
        ],
        name="Rust",
    )
    filter_id, extract_id, log_id, hook_id = (a["id"] for a in watch["actions"])
    serve_items(
        upstream,
        [("a", "Rust 2.0 out score=0.93 [lang=Rust] [version=2.0]"), ("b", "Cooking tips score=0.2")],
    )
    at = later(minutes=1)
    poll(at=at)
    pending = runs_of(db, filter_id)
    assert [r.state for r in pending] == ["pending", "pending"]
    assert all(r.scheduled_at is not None and r.attempts == 0 for r in pending)
    with caplog.at_level(logging.INFO, logger="tidings.watches.log"):
        drain(at=at)
    filtered = {r.result["score"]: r for r in runs_of(db, filter_id) if r.result}
    passed, gated = filtered[0.93], filtered[0.2]
    assert passed.state == "succeeded" and passed.result == {
        "passed": True,
        "score": 0.93,
        "reason": "fake engine",
        "enrichment_status": "disabled",
    }
    assert gated.state == "gated" and gated.result["passed"] is False and gated.error == ""
    assert passed.attempts == 1 and passed.started_at is not None and passed.completed_at is not None
    # Only the item that passed went on down the chain, through every action.
    [extracted] = runs_of(db, extract_id)
    assert extracted.feed_item_id == passed.feed_item_id and extracted.state == "succeeded"
    assert extracted.result == {
        "extracted": {"lang": "Rust", "version": "2.0"},
        "status": "complete",
        "enrichment_status": "disabled",
    }
    [logged] = runs_of(db, log_id)
    line = logged.result["rendered"]
    assert line.startswith("[rust] ") and logged.state == "succeeded"
    assert line in caplog.text
    logged_body = json.loads(line.removeprefix("[rust] "))
    assert logged_body["items"][0]["item"] == {"title": "Rust 2.0 out score=0.93 [lang=Rust] [version=2.0]"}
    [delivered] = runs_of(db, hook_id)
    assert delivered.state == "succeeded" and delivered.result == {"http_status": 200}
    [call] = upstream.requests_to("/hook")
    assert call.method == "POST" and call.headers["x-token"] == "s3cret"
    assert call.headers["content-type"] == "application/json"
    body = json.loads(call.body)
    item = db.get(FeedItem, passed.feed_item_id)
    assert item is not None
    assert body == {
        "watch": {"id": watch["id"], "name": "Rust"},
        "action_id": hook_id,
        "delivery": "instant",
        "window": None,
        "items": [
            {
                "key": f"rss:{item.external_id}",
                "source": {"label": "Local", "kind": "rss"},
                "item": {"title": item.data["title"], "url": item.data["url"]},
            }
        ],
    }
    # The engine was asked for JSON, with the default model the endpoint lists.
    chat = llm.chat_requests()[0]
    assert chat["response_format"] == {"type": "json_object"} and chat["model"] == "fake-model"
    # The activity of the filter shows both runs, its summary counts them.
    page = activity(client, api_user.headers, filter_id)
    assert {r["state"] for r in page["items"]} == {"succeeded", "gated"}
    assert page["summary"]["evaluated"]["succeeded"] == 1 and page["summary"]["evaluated"]["gated"] == 1
    assert page["summary"]["pending"] == page["summary"]["running"] == page["summary"]["retrying"] == 0
    # A second drain finds nothing to do; polling again adds no runs (the items are not new).
    assert drain(at=at) == 0
    poll(at=at + timedelta(minutes=10))
    assert len(runs_of(db, filter_id)) == 2


def test_a_score_at_the_threshold_passes(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    action = {
        "kind": "semantic_filter",
        "config": {"instructions": "x", "threshold": 0.5, "fetch_external_content": False},
    }
    watch = setup_watch(client, api_user, upstream, [action])
    serve_items(upstream, [("a", "Edge score=0.5"), ("b", "Below score=0.49")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    states = {r.result["score"]: r.state for r in runs_of(db, watch["actions"][0]["id"])}
    assert states == {0.5: "succeeded", 0.49: "gated"}


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("down", "HTTP 503"),
        ("prose", "prose, not JSON"),
        ("out_of_range", "outside 0 to 1"),
        ("hang", "unreachable"),
        ("not_chat", "not a chat completion"),
    ],
)
def test_engine_trouble_fails_the_run_and_it_is_retried_then_given_up(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    llm: FakeEngine,
    poll: Poll,
    drain: Drain,
    db: Session,
    mode: str,
    error: str,
) -> None:
    llm.mode = mode
    llm.hang_seconds = 3.0
    watch = setup_watch(client, api_user, upstream, [FILTER, {"kind": "log", "config": {}}])
    filter_id = watch["actions"][0]["id"]
    serve_items(upstream, [("a", "Something score=0.9")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    [run] = runs_of(db, filter_id)
    assert run.state == "failed" and error in run.error and run.attempts == 1
    assert run.completed_at is None and run.result is None
    assert run.scheduled_at is not None and 9 <= (run.scheduled_at - at).total_seconds() <= 11
    summary = activity(client, api_user.headers, filter_id)["summary"]
    assert summary["retrying"] == 1 and summary["evaluated"]["failed"] == 0
    # Not due yet: nothing happens before the retry time.
    assert drain(at=at + timedelta(seconds=5)) == 0
    second = at + timedelta(seconds=11)
    drain(at=second)
    [run] = runs_of(db, filter_id)
    assert run.state == "failed" and run.attempts == 2 and run.completed_at is None
    assert 59 <= (run.scheduled_at - second).total_seconds() <= 61
    third = second + timedelta(seconds=61)
    drain(at=third)
    [run] = runs_of(db, filter_id)
    assert run.state == "failed" and run.attempts == 3 and run.completed_at is not None
    assert run.scheduled_at is None
    assert drain(at=third + timedelta(hours=1)) == 0
    summary = activity(client, api_user.headers, filter_id)["summary"]
    assert summary["retrying"] == 0 and summary["evaluated"]["failed"] == 1
    # The chain never went on.
    assert runs_of(db, watch["actions"][1]["id"]) == []


def test_an_engine_that_comes_back_lets_the_retry_succeed(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    llm: FakeEngine,
    poll: Poll,
    drain: Drain,
    db: Session,
) -> None:
    llm.mode = "down"
    watch = setup_watch(client, api_user, upstream, [FILTER])
    serve_items(upstream, [("a", "Something score=0.9")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    llm.mode = "ok"
    drain(at=at + timedelta(seconds=15))
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "succeeded" and run.attempts == 2 and run.error == ""


def test_a_paused_watch_skips_its_queued_runs_and_starts_none(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    watch = setup_watch(client, api_user, upstream, [FILTER])
    serve_items(upstream, [("a", "One score=0.9")])
    at = later(minutes=1)
    poll(at=at)
    client.patch(f"/v1/watches/{watch['id']}", json={"is_active": False}, headers=api_user.headers)
    drain(at=at)
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "skipped" and run.completed_at is not None and "paused" in run.error
    assert run.attempts == 0
    serve_items(upstream, [("a", "One score=0.9"), ("b", "Two score=0.9")])
    poll(at=at + timedelta(minutes=10))
    assert len(runs_of(db, watch["actions"][0]["id"])) == 1
    summary = activity(client, api_user.headers, watch["actions"][0]["id"])["summary"]
    assert summary["evaluated"]["skipped"] == 1


def test_an_item_that_is_gone_errors_the_run_and_it_is_never_retried(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    watch = setup_watch(client, api_user, upstream, [FILTER])
    serve_items(upstream, [("a", "One score=0.9"), ("b", "Two score=0.9")])
    at = later(minutes=1)
    poll(at=at)
    runs = runs_of(db, watch["actions"][0]["id"])
    db.execute(delete(FeedItem).where(FeedItem.id == runs[0].feed_item_id))
    db.execute(
        update(FeedItem).where(FeedItem.id == runs[1].feed_item_id).values(data=["not", "a", "payload"])
    )
    db.commit()
    drain(at=at)
    gone, broken = runs_of(db, watch["actions"][0]["id"])
    assert gone.state == "errored" and "gone" in gone.error and gone.completed_at is not None
    assert broken.state == "errored" and "cannot be read" in broken.error
    assert drain(at=at + timedelta(hours=1)) == 0
    view = client.get(f"/v1/action-activity/{gone.id}", headers=api_user.headers).json()
    assert view["feed_item"] is None and view["run"]["state"] == "errored"
    assert view["feed"]["id"] == gone.feed_id and view["action"]["id"] == watch["actions"][0]["id"]


def test_a_run_left_running_is_taken_back(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    poll: Poll,
    drain: Drain,
    db: Session,
    settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    watch = setup_watch(client, api_user, upstream, [FILTER])
    serve_items(upstream, [("a", "One score=0.9")])
    at = later(minutes=1)
    poll(at=at)
    # A worker claims the run and dies.
    with transaction(session_factory) as session:
        [claimed] = claim_runs(session, at, 10, 10).runs
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "running" and run.attempts == 1
    summary = activity(client, api_user.headers, watch["actions"][0]["id"])["summary"]
    assert summary["running"] == 1

    async def sweep(moment: Any) -> int:
        drainer = RunDrain(settings, session_factory, clock=lambda: moment)
        try:
            return await drainer.sweep()
        finally:
            await drainer.aclose()

    assert asyncio.run(sweep(at + timedelta(seconds=599))) == 0
    assert asyncio.run(sweep(at + timedelta(seconds=601))) == 1
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "failed" and "taken back" in run.error and run.completed_at is None
    drain(at=at + timedelta(seconds=602))
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "succeeded" and run.attempts == 2
    # The dead worker's late answer is not recorded: the run moved on without it.
    with transaction(session_factory) as session:
        assert record_outcomes(session, [Outcome(claimed, "gated")], [], at + timedelta(seconds=700)) == 0
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "succeeded"


def test_a_run_left_running_with_its_attempts_spent_stays_failed(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    poll: Poll,
    drain: Drain,
    db: Session,
    session_factory: sessionmaker[Session],
    settings: Settings,
) -> None:
    watch = setup_watch(client, api_user, upstream, [FILTER])
    serve_items(upstream, [("a", "One score=0.9")])
    at = later(minutes=1)
    poll(at=at)
    db.execute(update(WatchActionRun).values(state="running", attempts=3, started_at=at))
    db.commit()

    async def sweep() -> int:
        drainer = RunDrain(settings, session_factory, clock=lambda: at + timedelta(seconds=700))
        try:
            return await drainer.sweep()
        finally:
            await drainer.aclose()

    assert asyncio.run(sweep()) == 1
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "failed" and run.completed_at is not None
    assert drain(at=at + timedelta(hours=1)) == 0


def test_a_deleted_action_ends_its_chain_there(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    watch = setup_watch(client, api_user, upstream, [FILTER, {"kind": "log", "config": {}}])
    serve_items(upstream, [("a", "One score=0.9")])
    at = later(minutes=1)
    poll(at=at)
    client.delete(f"/v1/actions/{watch['actions'][1]['id']}", headers=api_user.headers)
    drain(at=at)
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == "succeeded"
    db.expire_all()
    assert db.scalar(select(func.count()).select_from(WatchActionRun)) == 1


def test_a_watch_subscribed_later_does_not_replay_older_items(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    serve_items(upstream, [("a", "Old score=0.9")])
    at = later(minutes=1)
    poll(at=at)
    watch = make_watch(client, api_user.headers, [feed["id"]], [FILTER])
    serve_items(upstream, [("a", "Old score=0.9"), ("b", "New score=0.9")])
    poll(at=at + timedelta(minutes=10))
    runs = runs_of(db, watch["actions"][0]["id"])
    assert len(runs) == 1
    item = db.get(FeedItem, runs[0].feed_item_id)
    assert item is not None and item.external_id == "b"


def test_two_drains_at_once_run_every_run_exactly_once(
    upstream: Upstream, settings: Settings, engine: Engine
) -> None:
    """Two workers with their own connections on committed rows: each run is performed once."""
    upstream.serve("/hook", "ok", 200)
    now = utcnow()
    with Session(engine) as session:
        user = create_user(session, email="drains@example.com", name="D")
        account_id = user.account_id
        feed = Feed(id=new_ulid(), account_id=account_id, user_id=user.id, name="F")
        watch = Watch(id=new_ulid(), account_id=account_id, user_id=user.id, name="W")
        session.add_all([feed, watch])
        session.flush()
        session.add(WatchFeed(watch_id=watch.id, feed_id=feed.id, created_at=now))
        hook_action = WatchAction(
            id=new_ulid(),
            account_id=account_id,
            watch_id=watch.id,
            kind="webhook",
            rank=0,
            config={
                "url": upstream.url("/hook"),
                "method": "POST",
                "headers": {},
                "include_fields": [],
                "delivery": "instant",
                "digest_interval_seconds": 0,
            },
        )
        session.add(hook_action)
        items = [
            FeedItem(
                id=new_ulid(),
                account_id=account_id,
                feed_id=feed.id,
                source_kind="rss",
                source_label="L",
                external_id=f"x{n}",
                data={"title": f"T{n}"},
            )
            for n in range(40)
        ]
        session.add_all(items)
        session.flush()
        enqueue_first_runs(session, [i.id for i in items], now)
        session.commit()
    factory = (make_write_session_factory if is_sqlite_url(settings.database_url) else make_session_factory)(
        engine
    )
    small = settings.model_copy(update={"watch_drain_batch": 7})

    async def both() -> list[int]:
        drains = [RunDrain(small, factory, clock=lambda: now) for _ in range(2)]
        try:
            return list(await asyncio.gather(*(d.drain() for d in drains)))
        finally:
            for d in drains:
                await d.aclose()

    try:
        counts = asyncio.run(both())
        assert sum(counts) == 40
        keys = sorted(json.loads(s.body)["items"][0]["key"] for s in upstream.requests_to("/hook"))
        assert keys == sorted(f"rss:x{n}" for n in range(40))
        with Session(engine) as session:
            states = session.execute(
                select(WatchActionRun.state, func.count())
                .where(WatchActionRun.account_id == account_id)
                .group_by(WatchActionRun.state)
            ).all()
            assert dict(states) == {"succeeded": 40}
    finally:
        with Session(engine) as session:
            session.execute(delete(Account).where(Account.id == account_id))
            session.commit()
