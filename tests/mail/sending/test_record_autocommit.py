"""Sent outcomes recorded in autocommit on the connection the send worker keeps for them (PostgreSQL):
committed at once, no transaction left open, and a connection lost between groups replaced."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import is_sqlite_url, transaction
from app.identity.accounts import create_user
from app.kit.time import utcnow
from app.mail.sending.queue import Outcome, SendResult
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import MaildirTransport
from app.mail.sending.worker import SendConfig, SendWorker
from app.models import Campaign, Contact, Deliverable, DeliverableState
from tests.scratch_database import scratch_sessions


@pytest.fixture
def committed(database_url: str) -> Iterator[tuple[str, sessionmaker[Session]]]:
    if is_sqlite_url(database_url):
        pytest.skip("PostgreSQL only: SQLite records every group in a transaction")
    with scratch_sessions(database_url, "record_autocommit") as scratch:
        yield scratch


def sending_rows(factory: sessionmaker[Session], count: int) -> list[Outcome]:
    """`count` rows claimed under one lease, as outcomes the relay accepted."""
    now = utcnow()
    lease = now + timedelta(minutes=5)
    with transaction(factory) as session:
        user = create_user(session, email="owner@example.com", name="Owner", contact_limit=100)
        campaign = Campaign(
            account_id=user.account_id,
            title="T",
            subject="S",
            html="<p>x</p>",
            from_name="O",
            from_email="owner@example.com",
        )
        contacts = [
            Contact(account_id=user.account_id, email=f"r{n}@example.com", email_key=f"r{n}@example.com")
            for n in range(count)
        ]
        session.add_all([campaign, *contacts])
        session.flush()
        rows = [
            Deliverable(
                account_id=user.account_id,
                campaign_id=campaign.id,
                contact_id=contact.id,
                state=DeliverableState.SENDING,
                send_after=now,
                attempts=1,
                lease_until=lease,
            )
            for contact in contacts
        ]
        session.add_all(rows)
        session.flush()
        return [
            Outcome(
                row.id,
                campaign.id,
                row.contact_id,
                1,
                SendResult.SENT,
                message_id=f"<{row.id}@t>",
                lease_until=lease,
            )
            for row in rows
        ]


def test_sent_groups_are_committed_in_autocommit_and_a_lost_connection_is_replaced(
    committed: tuple[str, sessionmaker[Session]], settings: Settings, tmp_path: Path
) -> None:
    url, factory = committed
    outcomes = sending_rows(factory, 3)
    worker = SendWorker(
        SendConfig.from_settings(settings), factory, MaildirTransport(tmp_path), MailTokens("k" * 48)
    )
    observer = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with observer.connect() as other:

            def states() -> list[str]:
                return list(other.execute(select(Deliverable.state).order_by(Deliverable.id)).scalars())

            worker.record(outcomes[:1])
            assert states() == ["sent", "sending", "sending"]  # seen by another connection: committed
            open_transactions = other.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND state LIKE 'idle in transaction%'"
                )
            ).scalar_one()
            assert open_transactions == 0

            # The database drops every other connection (a restart, a failover): the next group is
            # written on a fresh connection all the same.
            other.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            worker.record(outcomes[1:2])
            assert states() == ["sent", "sent", "sending"]
            # An error that is not a lost connection is raised (the recorder reports it to the lane):
            # psycopg's own, since sent groups go to psycopg directly.
            with pytest.raises(psycopg.Error):
                worker.record([replace(outcomes[2], message_id="\x00")])
            worker.record(outcomes[2:])
            assert states() == ["sent", "sent", "sent"]
    finally:
        worker.close()
        observer.dispose()


def test_a_sent_group_binds_its_arrays_in_binary_and_keeps_each_rows_own_values(
    committed: tuple[str, sessionmaker[Session]], settings: Settings, tmp_path: Path
) -> None:
    """The group's ids, Message-IDs and leases go to PostgreSQL as binary arrays (PsycopgStatement's
    `binary`): each row gets its own Message-ID (or none), a row claimed without a lease is recorded by
    its state alone, and a row whose lease has moved on (claimed again by another process) is left."""
    _, factory = committed
    outcomes = sending_rows(factory, 4)
    with transaction(factory) as session:
        moved = session.get(Deliverable, outcomes[3].deliverable_id)
        assert moved is not None and moved.lease_until is not None
        moved.lease_until = moved.lease_until + timedelta(minutes=1)
    group = [
        outcomes[0],
        replace(outcomes[1], message_id=None),
        replace(outcomes[2], lease_until=None, message_id='<ünïcode,"quoted" {braces}@t>'),
        outcomes[3],
    ]
    worker = SendWorker(
        SendConfig.from_settings(settings), factory, MaildirTransport(tmp_path), MailTokens("k" * 48)
    )
    try:
        worker.record(group)
    finally:
        worker.close()
    with factory() as session:
        columns = select(Deliverable.state, Deliverable.message_id, Deliverable.lease_until)
        rows = session.execute(columns.order_by(Deliverable.id)).all()
    assert [(row.state, row.message_id) for row in rows] == [
        ("sent", outcomes[0].message_id),
        ("sent", None),
        ("sent", '<ünïcode,"quoted" {braces}@t>'),
        ("sending", None),
    ]
    assert [row.lease_until is None for row in rows] == [True, True, True, False]
