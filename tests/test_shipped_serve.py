"""`tidings serve` as people run it: the installed console script, uvicorn on uvloop (which
uvicorn[standard] installs), its own scheduler on. Every background job that runs inside it meets its
real outside party on loopback: campaign sending and an automation's drip email reach an SMTP server
(aiosmtpd), a hosted form's double opt-in email goes out inline over the same loop, a feed on a local
HTTP server is polled and its watch filters the items with an engine (a fake OpenAI-compatible one) and
posts them to a webhook receiver; and the purge, the feed retention, the sweep of a dead worker's send
claims (its email then goes out) and the telemetry heartbeat do their work as the process starts. On SQLite, and on PostgreSQL with TIDINGS_TEST_DATABASE_URL.

(The unit tests drive each job on asyncio's own loop; uvloop's transports are different classes, and an
assert about them once kept `tidings serve` from sending any email at all.)"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from app.db import make_write_session_factory
from app.identity.tokens import hash_token
from app.kit.ids import new_ulid, ulid_floor
from app.kit.time import utcnow
from app.models import Campaign, Contact, Deliverable, Feed, FeedItem, TelemetrySetting, User, UserSession
from tests.fake_engine import FakeEngine, running_engine
from tests.processes import Running, committed_users, environment, shipped_serve
from tests.shipped import (
    add_contacts,
    api,
    confirm_path,
    create_form,
    delivered,
    drip,
    expected_deliveries,
    new_list,
    received_with,
    send_campaign,
    sent_count,
    wait_until,
    watched_feed,
)
from tests.smtp_sink import SmtpSink, running_sink
from tests.upstream import Upstream, running_upstream

OWNER = "shipped-serve@example.com"


@dataclass
class Shipped:
    """One `tidings serve` for the module, with its outside parties on loopback and an account."""

    served: Running
    var: Path
    token: str
    sink: SmtpSink
    upstream: Upstream
    llm: FakeEngine


@pytest.fixture(scope="module")
def shipped(database_url: str, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shipped]:
    """Started once for the tests below (a start costs seconds): each uses its own list, subjects,
    feed and addresses. The account and all it holds go after the server stopped."""
    var = tmp_path_factory.mktemp("serve") / "var"
    with ExitStack() as stack:
        [(_, token)] = stack.enter_context(committed_users(engine, OWNER))
        sink = stack.enter_context(running_sink())
        upstream = stack.enter_context(running_upstream())
        llm = stack.enter_context(running_engine())
        env = {
            "TIDINGS_SMTP_URL": sink.url,
            # The feed, the engine and the webhook receiver are on loopback.
            "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "true",
            "TIDINGS_ENGINE_BASE_URL": llm.base_url,
        }
        served = stack.enter_context(shipped_serve(database_url, var, **env))
        yield Shipped(served, var, token, sink, upstream, llm)


def test_uvicorn_serves_on_uvloop() -> None:
    """What the other tests here rely on: uvicorn's `auto` loop is uvloop when it can be imported."""
    assert importlib.util.find_spec("uvloop") is not None, "uvicorn[standard] installs uvloop"


def test_a_campaign_goes_out_over_smtp(shipped: Shipped) -> None:
    readers = [f"reader{n}@example.com" for n in range(3)]
    with api(shipped.served, shipped.token) as http:
        list_id = new_list(http, "Readers")
        add_contacts(http, list_id, readers)
        campaign_id = send_campaign(http, list_id, "Hello from serve")
        wait_until(
            lambda: len(received_with(shipped.sink, "Hello from serve")) == 3,
            "three emails of the campaign reached the SMTP server",
            shipped.served,
        )
        wait_until(
            lambda: sent_count(http, campaign_id) == 3, "the campaign counts three sent", shipped.served
        )
    assert f"email goes to the SMTP relay 127.0.0.1:{shipped.sink.port}" in shipped.served.output()
    got = received_with(shipped.sink, "Hello from serve")
    assert sorted(r.recipients[0] for r in got) == readers
    assert all("Hi Ada" in r.part("html") for r in got)


def test_a_form_sign_up_is_confirmed_by_email_and_the_new_member_gets_the_drip_email(
    database_url: str, shipped: Shipped
) -> None:
    """The confirmation email is sent inline by the request (on uvloop: before the fix, a 503 after
    10 s); confirming adds the contact to the list, which fires the automation, whose email the
    scheduler's send lanes deliver."""
    served, sink = shipped.served, shipped.sink
    with api(served, shipped.token) as http:
        list_id = new_list(http, "Members")
        drip(http, list_id, "Welcome, member")
        form_id = create_form(served, environment(database_url, shipped.var, served.base), OWNER, list_id)

        signed = http.post(f"/f/{form_id}", data={"email": "visitor@example.com"})
        assert signed.status_code == 200, signed.text
        [confirmation] = sink.to("visitor@example.com")
        assert confirmation.message["Subject"] == "Confirm your subscription to Weekly"
        confirmed = http.get(confirm_path(confirmation))
        assert confirmed.status_code == 200, confirmed.text
        assert "You are subscribed" in confirmed.text

        wait_until(
            lambda: len(received_with(sink, "Welcome, member")) == 1,
            "the automation's email reached the new member",
            served,
        )
    [welcome] = received_with(sink, "Welcome, member")
    assert welcome.recipients == ["visitor@example.com"]


def test_a_feed_is_polled_and_its_watch_filters_with_an_engine_and_calls_a_webhook(shipped: Shipped) -> None:
    items = 6
    with api(shipped.served, shipped.token) as http:
        feed, _ = watched_feed(http, shipped.upstream, items)
        wait_until(
            lambda: delivered(shipped.upstream) == expected_deliveries(items),
            "the items that passed the filter reached the webhook, each once",
            shipped.served,
        )
        listed = http.get(f"/v1/feeds/{feed['id']}/items").json()["items"]
    assert len(listed) == items
    assert len(shipped.llm.chat_requests()) == items  # the engine scored each item once


def test_as_it_starts_it_purges_prunes_takes_back_lost_claims_and_sends_telemetry(
    database_url: str, engine: Engine, upstream: Upstream, smtp_sink: SmtpSink, tmp_path: Path
) -> None:
    """The hourly jobs and the sweeps run first as the scheduler starts: what is already due goes at
    once. (A server of its own: what it finds due must be there before it starts.)"""
    with committed_users(engine, "shipped-start@example.com") as [(account_id, _)]:
        arranged = arrange_due_work(engine, account_id)
        env = {
            "TIDINGS_SMTP_URL": smtp_sink.url,
            "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "true",
            "TIDINGS_TELEMETRY_URL": upstream.url("/telemetry"),
        }
        upstream.serve("/telemetry", "", 204)
        try:
            with shipped_serve(database_url, tmp_path / "var", **env) as served:
                wait_until(
                    lambda: arranged.sessions() == {arranged.live_session},
                    "the expired session is purged",
                    served,
                )
                wait_until(lambda: arranged.items() == {"new"}, "the item past retention is pruned", served)
                wait_until(
                    lambda: len(smtp_sink.to("claimed@example.com")) == 1,
                    "the email a dead worker had claimed is sent once its lease is over",
                    served,
                )
                wait_until(
                    lambda: len(upstream.requests_to("/telemetry")) == 1, "one telemetry event", served
                )
        finally:
            with Session(engine) as session:
                session.execute(delete(TelemetrySetting))
                session.commit()
    [event] = upstream.requests_to("/telemetry")
    assert event.method == "POST" and b'"heartbeat"' in event.body


@dataclass
class Arranged:
    engine: Engine
    session_ids: tuple[int, int]
    live_session: int
    feed_id: str

    def sessions(self) -> set[int]:
        with Session(self.engine) as session:
            return set(session.scalars(select(UserSession.id).where(UserSession.id.in_(self.session_ids))))

    def items(self) -> set[str]:
        with Session(self.engine) as session:
            return set(session.scalars(select(FeedItem.external_id).where(FeedItem.feed_id == self.feed_id)))


def arrange_due_work(engine: Engine, account_id: int) -> Arranged:
    """Committed rows of work already due for the start-up jobs: an expired and a live session, a feed
    with an item past its retention and a recent one, an email claimed by a worker that died an hour
    ago, and telemetry turned on with nothing sent yet."""
    now = utcnow()
    with make_write_session_factory(engine)() as session:
        user_id = session.scalars(select(User.id).where(User.account_id == account_id)).one()
        expired, live = (
            UserSession(user_id=user_id, token_hash=hash_token(uuid.uuid4().hex), expires_at=expires_at)
            for expires_at in (now - timedelta(days=1), now + timedelta(days=1))
        )
        # A paused feed (never polled here) keeping items two days: one stored three days ago, one now.
        feed = Feed(id=new_ulid(), account_id=account_id, name="Old news", is_active=False, retention_days=2)
        contact = Contact(account_id=account_id, email="claimed@example.com", email_key="claimed@example.com")
        campaign = Campaign(
            account_id=account_id,
            title="Claimed",
            subject="Claimed",
            html="<p>Hi</p>",
            from_name="T",
            from_email="news@example.com",
            scheduled_at=now - timedelta(hours=2),
            sent_at=now - timedelta(hours=2),
        )
        # A staff user turned telemetry on; nothing was sent yet.
        setting = TelemetrySetting(id=1, mode="on", installation_id=str(uuid.uuid4()))
        session.add_all([expired, live, feed, contact, campaign, setting])
        session.flush()
        old, new = (
            FeedItem(
                id=item_id,
                account_id=account_id,
                feed_id=feed.id,
                source_kind="rss",
                external_id=name,
                data={},
            )
            for item_id, name in ((ulid_floor(now - timedelta(days=3)), "old"), (new_ulid(), "new"))
        )
        claimed = Deliverable(
            account_id=account_id,
            campaign_id=campaign.id,
            contact_id=contact.id,
            state="sending",
            send_after=now - timedelta(hours=2),
            lease_until=now - timedelta(hours=1),
            attempts=1,
        )
        session.add_all([old, new, claimed])
        session.commit()
        return Arranged(engine, (expired.id, live.id), live.id, feed.id)
