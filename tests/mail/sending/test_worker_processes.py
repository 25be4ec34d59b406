"""Several `tidings worker` processes share one campaign on a real database without sending anything
twice (PostgreSQL: SKIP LOCKED; SQLite: one writer at a time)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, func, insert, select
from sqlalchemy.orm import Session

from app.identity.accounts import create_user
from app.kit.time import utcnow
from app.models import Account, Campaign, CampaignList, Contact, ContactList, Deliverable, ListMembership
from tests.mail.sending.conftest import SmtpSink

RECIPIENTS = 300


@pytest.fixture
def committed_campaign(engine: Engine) -> Iterator[tuple[int, int]]:
    """A campaign due now to RECIPIENTS contacts, really committed (the workers are other processes)."""
    now = utcnow()
    with Session(engine) as session:
        user = create_user(session, email="workers@example.com", name="W", contact_limit=100_000)
        account_id = user.account_id
        newsletter = ContactList(account_id=account_id, user_id=user.id, name="All")
        session.add(newsletter)
        session.flush()
        session.execute(
            insert(Contact),
            [
                {
                    "account_id": account_id,
                    "email": f"r{n:04d}@example.com",
                    "email_key": f"r{n:04d}@example.com",
                }
                for n in range(RECIPIENTS)
            ],
        )
        ids = session.scalars(select(Contact.id).where(Contact.account_id == account_id)).all()
        session.execute(
            insert(ListMembership),
            [{"list_id": newsletter.id, "contact_id": cid, "created_at": now} for cid in ids],
        )
        campaign = Campaign(
            account_id=account_id,
            title="Shared",
            subject="Shared {{ first_name | 'work' }}",
            html='<p>Hello</p><a href="https://example.com/">x</a>',
            from_name="T",
            from_email="news@example.com",
            scheduled_at=now,
        )
        session.add(campaign)
        session.flush()
        session.add(CampaignList(campaign_id=campaign.id, list_id=newsletter.id))
        session.commit()
        campaign_id = campaign.id
    yield account_id, campaign_id
    with Session(engine) as session:
        session.execute(delete(Account).where(Account.id == account_id))
        session.commit()


def test_three_workers_send_each_recipient_exactly_once(
    database_url: str,
    engine: Engine,
    committed_campaign: tuple[int, int],
    smtp_sink: SmtpSink,
    tmp_path: Path,
) -> None:
    _, campaign_id = committed_campaign
    env = {
        **os.environ,
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_VAR_DIR": str(tmp_path / "var"),
        "TIDINGS_SECRET_KEY": "worker-test-secret-key-long-enough-to-sign",
        "TIDINGS_SMTP_URL": smtp_sink.url,
        "TIDINGS_SEND_BATCH_SIZE": "20",
    }
    command = [sys.executable, "-c", "from app.cli import main; main()", "worker", "--once"]
    workers = [subprocess.Popen(command, env=env, stderr=subprocess.PIPE) for _ in range(3)]
    for worker in workers:
        _, stderr = worker.communicate(timeout=120)
        assert worker.returncode == 0, stderr.decode()[-3000:]
        assert b"Traceback" not in stderr, stderr.decode()[-3000:]
    per_recipient = Counter(address for message in smtp_sink.received for address in message.recipients)
    assert len(per_recipient) == RECIPIENTS
    assert set(per_recipient.values()) == {1}
    with Session(engine) as session:
        states = dict(
            session.execute(
                select(Deliverable.state, func.count())
                .where(Deliverable.campaign_id == campaign_id)
                .group_by(Deliverable.state)
            ).all()
        )
    assert states == {"sent": RECIPIENTS}
