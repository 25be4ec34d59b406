"""The suppressions migration fills each account's list from what happened before it: contacts that
hard-bounced and contacts that complained (deleted ones too), each address once, on both databases."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, func, insert, select, text
from sqlalchemy.engine import make_url

from app.db import create_db_engine, is_sqlite_url, make_session_factory
from app.identity.accounts import create_user
from app.migrate import alembic_config
from app.models import Campaign, Contact, Deliverable, Suppression
from tests.factories import campaign_body

BEFORE = "2026_11_25_account_webhooks"
AT = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def scratch_url(database_url: str, tmp_path: Path) -> Iterator[str]:
    """An empty database of the test's kind, dropped afterwards."""
    if is_sqlite_url(database_url):
        yield f"sqlite:///{tmp_path / 'backfill.db'}"
        return
    name = f"tidings_backfill_{os.getpid()}"
    admin = create_engine(make_url(database_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def test_hard_bounces_and_complaints_so_far_are_suppressed(scratch_url: str) -> None:
    config = alembic_config(scratch_url)
    command.upgrade(config, BEFORE)
    engine = create_db_engine(scratch_url)
    try:
        factory = make_session_factory(engine)
        with factory() as session:
            ann, bob = (create_user(session, email=f"{n}@accounts.example", name=n) for n in ("ann", "bob"))
            contacts = {
                name: Contact(
                    account_id=account,
                    email=email,
                    email_key=email.lower(),
                    bounced_at=AT if bounced else None,
                    deleted_at=AT if deleted else None,
                )
                for name, account, email, bounced, deleted in [
                    ("bounced", ann.account_id, "Bounced@Example.com", True, False),
                    ("complained", ann.account_id, "complained@example.com", False, False),
                    ("both", ann.account_id, "both@example.com", True, False),
                    ("deleted", ann.account_id, "deleted@example.com", True, True),
                    ("clean", ann.account_id, "clean@example.com", False, False),
                    ("other", bob.account_id, "bounced@example.com", True, False),
                ]
            }
            session.add_all(contacts.values())
            session.flush()
            # Only the columns the schema had then (the model has grown since).
            campaign_id = session.execute(
                insert(Campaign).values(account_id=ann.account_id, **campaign_body()).returning(Campaign.id)
            ).scalar_one()
            for name, spam in [("complained", True), ("both", True), ("clean", False), ("bounced", False)]:
                session.add(
                    Deliverable(
                        account_id=ann.account_id,
                        campaign_id=campaign_id,
                        contact_id=contacts[name].id,
                        state="sent",
                        sent_at=AT,
                        spam_at=AT if spam else None,
                    )
                )
            session.commit()
            accounts = {ann.account_id: "ann", bob.account_id: "bob"}

        command.upgrade(config, "head")

        with factory() as session:
            # Tables SQLite's batch mode rebuilt on the way (accounts, campaigns) cascaded nothing away.
            assert session.scalar(select(func.count()).select_from(Contact)) == len(contacts)
            assert session.scalar(select(func.count()).select_from(Deliverable)) == 4
            rows = session.execute(
                select(Suppression.account_id, Suppression.email, Suppression.email_key, Suppression.reason)
            ).all()
        found = sorted((accounts[r.account_id], r.email, r.email_key, r.reason) for r in rows)
        assert found == [
            ("ann", "Bounced@Example.com", "bounced@example.com", "bounce"),
            ("ann", "both@example.com", "both@example.com", "complaint"),
            ("ann", "complained@example.com", "complained@example.com", "complaint"),
            ("ann", "deleted@example.com", "deleted@example.com", "bounce"),
            ("bob", "bounced@example.com", "bounced@example.com", "bounce"),
        ]
        command.downgrade(config, BEFORE)
    finally:
        engine.dispose()
