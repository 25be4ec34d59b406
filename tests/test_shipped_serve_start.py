"""`tidings serve` as shipped (see tests/test_shipped_serve.py) does what is already due as it starts:
its hourly jobs and its sweeps run first, then wait their interval. The purge of expired sign-in rows,
feed retention, the sweep of a dead worker's send claims (its email then goes out over SMTP) and the
telemetry heartbeat (to a receiver on loopback). A module of its own: no other server with a scheduler
may run beside it, or that one could take the work."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from app.db import make_write_session_factory
from app.identity.tokens import hash_token
from app.kit.ids import new_ulid, ulid_floor
from app.kit.time import utcnow
from app.models import Campaign, Contact, Deliverable, Feed, FeedItem, TelemetrySetting, User, UserSession
from tests.processes import committed_users, shipped_serve
from tests.shipped import wait_until
from tests.smtp_sink import SmtpSink
from tests.upstream import Upstream


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
        # A staff user turned telemetry on; nothing was sent yet. The installation has one such row, which
        # a test before this one may have left (magpie's `telemetry` verbs through a real serve).
        session.execute(delete(TelemetrySetting))
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
