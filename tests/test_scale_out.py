"""The production shape on PostgreSQL: two API processes (no scheduler) and two `tidings worker`
processes. Through them, at the same time: a 5,000-recipient campaign goes out with every email sent
exactly once; a feed on a loopback RSS server is polled (twice: a source added later makes it due again,
and the second poll re-reads the first source) and a watch chain (semantic_filter on a fake engine, then
a webhook to a loopback receiver) runs every item's actions exactly once and delivers every item that
passed exactly once. The email API's rate limit is one limit across both API processes (shared in
Redis)."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.db import is_sqlite_url
from app.models import Deliverable, FeedItem, User, WatchActionDelivery, WatchActionRun
from app.models.watch_runs import TERMINAL_RUN_STATES
from tests.factories import rss_source
from tests.fake_engine import FakeEngine
from tests.feeds.conftest import make_feed
from tests.processes import committed_users, served_app, shipped_worker
from tests.smtp_sink import SmtpSink
from tests.upstream import Upstream
from tests.watches.conftest import make_watch, serve_items

RECIPIENTS = 5000
REDIS_URL = "redis://127.0.0.1:6379/0"
RATE_LIMIT = 40
# Items of the first source, then of the source added after the first poll.
FIRST_ITEMS = 80
SECOND_ITEMS = 70
ITEMS = FIRST_ITEMS + SECOND_ITEMS
TITLE = re.compile(r"Item (\d+) score=")


def passes(n: int) -> bool:
    """Which items the fake engine scores above the filter's threshold (0.8)."""
    return n % 3 == 0


def entries(numbers: range) -> list[tuple[str, str]]:
    return [(f"g{n}", f"Item {n} score={0.93 if passes(n) else 0.2}") for n in numbers]


@pytest.fixture
def accounts(engine: Engine) -> Iterator[tuple[str, str]]:
    """Two committed users: one sends the campaign, one probes the rate limit."""
    with committed_users(engine, "scale-sender@example.com", "scale-prober@example.com") as made:
        with Session(engine) as session:
            prober_id = session.scalar(select(User.id).where(User.account_id == made[1][0]))
        # The schema is made anew each session, so the prober has the same user id in every run: a run
        # less than two minutes earlier left its hits in the prober's sliding window in Redis.
        client = redis.Redis.from_url(REDIS_URL)
        try:
            stale = list(client.scan_iter(match=f"LIMITS:{{LIMITER/mail/{prober_id}/*"))
            if stale:
                client.delete(*stale)
        finally:
            client.close()
        yield made[0][1], made[1][1]


def test_two_api_processes_and_two_workers(
    database_url: str,
    engine: Engine,
    accounts: tuple[str, str],
    smtp_sink: SmtpSink,
    upstream: Upstream,
    llm: FakeEngine,
    tmp_path: Path,
) -> None:
    if is_sqlite_url(database_url):
        pytest.skip("PostgreSQL only: several processes on one SQLite file is not the production shape")
    sender, prober = accounts
    shared = {
        "TIDINGS_REDIS_URL": REDIS_URL,
        "TIDINGS_MAIL_RATE_LIMIT": f"{RATE_LIMIT}/minute",
        "TIDINGS_SCHEDULER": "false",
        "TIDINGS_SMTP_URL": smtp_sink.url,
        # The feed, the engine and the receiver are on loopback.
        "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "true",
        "TIDINGS_ENGINE_BASE_URL": llm.base_url,
    }
    worker_env = {
        "TIDINGS_SMTP_URL": smtp_sink.url,
        "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "true",
        "TIDINGS_ENGINE_BASE_URL": llm.base_url,
    }
    upstream.serve("/hook", "ok", 200)
    with ExitStack() as stack:
        apis = [stack.enter_context(served_app(database_url, tmp_path / "var", **shared)) for _ in range(2)]
        # The workers stop first (the stack unwinds in reverse), each failing the test on a traceback.
        for _ in range(2):
            stack.enter_context(shipped_worker(database_url, tmp_path / "var", apis[0], **worker_env))
        clients = [
            stack.enter_context(
                httpx.Client(base_url=api, headers={"Authorization": f"Bearer {sender}"}, timeout=60)
            )
            for api in apis
        ]
        list_id = clients[0].post("/lists", json={"name": "Everyone"}).json()["id"]
        for batch in range(RECIPIENTS // 1000):
            contacts = [{"email": f"s{batch}-{n}@example.com", "lists": [list_id]} for n in range(1000)]
            body = {"contacts": contacts}
            assert clients[batch % 2].post("/contacts/batch", json=body).status_code == 200
        campaign = (
            clients[1]
            .post(
                "/campaigns",
                json={
                    "title": "Scale",
                    "subject": "Hello {{ first_name | 'there' }}",
                    "html": '<p>Hi</p><a href="https://example.com/">link</a>',
                    "from_name": "Scale",
                    "from_email": "news@example.com",
                    "lists": [list_id],
                },
            )
            .json()
        )
        assert clients[0].post(f"/campaigns/{campaign['id']}/send").status_code == 200

        # The watch subscribes before the feed's first poll (a watch does not replay older items).
        v1 = clients[0]
        serve_items(upstream, entries(range(FIRST_ITEMS)), "/first.xml")
        first = rss_source(upstream, "/first.xml")
        feed = make_feed(v1, v1.headers, [first], is_active=False, poll_interval_seconds=3600)
        filter_action = {
            "kind": "semantic_filter",
            "config": {"instructions": "Items worth it", "fetch_external_content": False},
        }
        hook_action = {"kind": "webhook", "config": {"url": upstream.url("/hook")}}
        watch = make_watch(clients[1], v1.headers, [feed["id"]], [filter_action, hook_action])
        filter_id, hook_id = (action["id"] for action in watch["actions"])
        activated = v1.patch(f"/v1/feeds/{feed['id']}", json={"is_active": True})
        assert activated.status_code == 200, activated.text

        # One limit across both API processes: exactly RATE_LIMIT of the prober's requests pass.
        statuses = Counter(
            httpx.get(f"{apis[n % 2]}/me", headers={"Authorization": f"Bearer {prober}"}).status_code
            for n in range(RATE_LIMIT + 10)
        )
        assert statuses == {200: RATE_LIMIT, 429: 10}

        deadline = time.monotonic() + 75
        # The first poll stored the first source's items; adding a second source makes the feed
        # due again at once (an interval of an hour would not), and that poll re-reads the first.
        while time.monotonic() < deadline and stored_items(engine, feed["id"]) < FIRST_ITEMS:
            time.sleep(0.2)
        assert stored_items(engine, feed["id"]) == FIRST_ITEMS
        serve_items(upstream, entries(range(FIRST_ITEMS, ITEMS)), "/second.xml")
        sources = {"version": "v1", "sources": [first, rss_source(upstream, "/second.xml")]}
        added = clients[1].put(f"/v1/feeds/{feed['id']}/sources", json=sources)
        assert added.status_code == 200 and added.json()["added"] == 1, added.text

        while time.monotonic() < deadline:
            sent = sent_emails(engine, campaign["id"])
            settled = settled_runs(engine, filter_id)
            to_deliver = sum(1 for run in settled if run.state == "succeeded")
            delivered = len(settled_runs(engine, hook_id))
            if sent == RECIPIENTS and len(settled) == ITEMS and delivered == to_deliver:
                break
            time.sleep(0.5)
    assert sent_emails(engine, campaign["id"]) == RECIPIENTS
    per_recipient = Counter(address for message in smtp_sink.received for address in message.recipients)
    assert len(per_recipient) == RECIPIENTS
    assert set(per_recipient.values()) == {1}

    # Both sources were polled again after the first poll, which added nothing twice.
    assert len(upstream.requests_to("/first.xml")) >= 2
    assert stored_items(engine, feed["id"]) == ITEMS
    expected_passed = {f"g{n}" for n in range(ITEMS) if passes(n)}
    with Session(engine) as session:
        external_ids = {
            row.id: row.external_id
            for row in session.execute(
                select(FeedItem.id, FeedItem.external_id).where(FeedItem.feed_id == feed["id"])
            )
        }
        runs = list(session.scalars(select(WatchActionRun).where(WatchActionRun.watch_id == watch["id"])))
        deliveries = list(
            session.scalars(select(WatchActionDelivery).where(WatchActionDelivery.action_id == hook_id))
        )
    # Each (action, item) has one run.
    assert Counter(Counter((run.action_id, run.feed_item_id) for run in runs).values()) == {1: len(runs)}
    filtered = [run for run in runs if run.action_id == filter_id]
    hooked = [run for run in runs if run.action_id == hook_id]
    assert {external_ids[run.feed_item_id] for run in filtered} == set(external_ids.values())
    # Nothing failed along the way (the engine and the receiver always answer), so every run took one
    # attempt; a run claimed by both workers would count two.
    retried = [(run.kind, run.state, run.attempts, run.error) for run in runs if run.attempts != 1]
    failed_calls = [(d.state, d.http_status, d.error) for d in deliveries if d.state != "succeeded"]
    assert not retried, (retried, failed_calls)
    passed = {external_ids[run.feed_item_id] for run in filtered if run.state == "succeeded"}
    assert passed == expected_passed
    assert {run.state for run in filtered if run.state != "succeeded"} == {"gated"}
    # The engine scored each item once.
    scored = Counter(TITLE.search(r["messages"][1]["content"]).group(1) for r in llm.chat_requests())
    assert len(scored) == ITEMS and set(scored.values()) == {1}
    # Only what passed went on to the webhook, each delivered once, each delivery recorded once.
    assert {external_ids[run.feed_item_id] for run in hooked} == expected_passed
    assert {run.state for run in hooked} == {"succeeded"}
    received = Counter(
        item["key"] for call in upstream.requests_to("/hook") for item in json.loads(call.body)["items"]
    )
    assert received == Counter({f"rss:{key}": 1 for key in expected_passed})
    assert len(deliveries) == len(hooked)
    assert not failed_calls
    assert {run.delivery_id for run in hooked} == {delivery.id for delivery in deliveries}


def sent_emails(engine: Engine, campaign_id: object) -> int:
    with Session(engine) as session:
        return (
            session.scalar(
                select(func.count()).where(
                    Deliverable.campaign_id == campaign_id, Deliverable.state == "sent"
                )
            )
            or 0
        )


def stored_items(engine: Engine, feed_id: str) -> int:
    with Session(engine) as session:
        return session.scalar(select(func.count()).where(FeedItem.feed_id == feed_id)) or 0


def settled_runs(engine: Engine, action_id: str) -> list[WatchActionRun]:
    """The action's runs that rest for good (a failed run waiting for its retry has no completion)."""
    with Session(engine) as session:
        return list(
            session.scalars(
                select(WatchActionRun).where(
                    WatchActionRun.action_id == action_id,
                    WatchActionRun.state.in_(TERMINAL_RUN_STATES),
                    WatchActionRun.completed_at.is_not(None),
                )
            )
        )
