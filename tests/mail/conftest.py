"""Fixtures of the bounce mailbox tests (test_bounce_mailbox.py, test_bounce_imap.py): a campaign sent
by a real `tidings worker` into the loopback SMTP server, with TIDINGS_BOUNCE_DOMAIN set."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.orm import Session

from app.identity.accounts import create_user
from app.kit.time import utcnow
from app.models import Account, Campaign, CampaignList, Contact, ContactList, Deliverable, ListMembership
from tests.factories import add_contacts
from tests.processes import environment, tidings_script
from tests.smtp_sink import running_sink

BOUNCE_DOMAIN = "bounces.example.org"
FROM_EMAIL = "news@example.com"
BASE = "https://mail.example.org"
Sample = Callable[[str, str, str], bytes]


@dataclass(frozen=True)
class Email:
    deliverable_id: int
    contact_id: int
    address: str
    mail_from: str
    message_id: str
    list_unsubscribe: str


@dataclass
class Sent:
    database_url: str
    var_dir: Path
    emails: list[Email]
    # The addresses whose email a test already used (each test takes fresh ones).
    taken: int = 0

    def take(self) -> Email:
        email = self.emails[self.taken]
        self.taken += 1
        return email


def committed_campaign(engine: Engine, prefix: str, recipients: int) -> tuple[int, int]:
    """An account and a campaign due now to `recipients` contacts `{prefix}{n}@example.com`, committed
    for other processes. A prefix of its own per call (`unique`): on a PostgreSQL database that several
    test processes share, another test's worker may send this campaign, and this one another's."""
    now = utcnow()
    with Session(engine) as session:
        user = create_user(session, email=f"{prefix}-owner@example.com", name="V", contact_limit=1000)
        account_id = user.account_id
        readers = ContactList(account_id=account_id, user_id=user.id, name="Readers")
        session.add(readers)
        ids = add_contacts(session, account_id, recipients, prefix)
        session.execute(
            insert(ListMembership), [{"list_id": readers.id, "contact_id": i, "created_at": now} for i in ids]
        )
        campaign = Campaign(
            account_id=account_id,
            title="Hello",
            subject="Hello",
            html='<p>Hi {{ first_name | "there" }}</p><a href="https://example.com/">Read</a>',
            from_name="Tidings",
            from_email=FROM_EMAIL,
            scheduled_at=now,
        )
        session.add(campaign)
        session.flush()
        session.add(CampaignList(campaign_id=campaign.id, list_id=readers.id))
        session.commit()
        return account_id, campaign.id


def drop_account(engine: Engine, account_id: int) -> None:
    with Session(engine) as session:
        session.execute(delete(Account).where(Account.id == account_id))
        session.commit()


def unique(name: str) -> str:
    return f"{name}{secrets.token_hex(3)}x"


def send_with_worker(database_url: str, var_dir: Path, **env: str) -> list[tuple[str, str, str, str]]:
    """Runs the real `tidings worker --once` into a loopback SMTP server: (MAIL FROM, RCPT TO,
    Message-ID, List-Unsubscribe) of each email received."""
    with running_sink() as sink:
        done = subprocess.run(
            [tidings_script(), "worker", "--once"],
            env=environment(database_url, var_dir, BASE, TIDINGS_SMTP_URL=sink.url, **env),
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr.decode()[-3000:]
        assert b"Traceback" not in done.stderr, done.stderr.decode()[-3000:]
        with sink.lock:
            return [
                (
                    r.sender,
                    r.recipients[0],
                    str(r.message["Message-ID"]),
                    " ".join(str(r.message["List-Unsubscribe"]).split()),
                )
                for r in sink.received
            ]


@pytest.fixture(scope="module")
def sent(database_url: str, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sent]:
    """One campaign to 20 contacts, sent with TIDINGS_BOUNCE_DOMAIN by a real worker process."""
    prefix = unique("verp")
    account_id, campaign_id = committed_campaign(engine, prefix, 20)
    var_dir = tmp_path_factory.mktemp("verp") / "var"
    try:
        received = send_with_worker(database_url, var_dir, TIDINGS_BOUNCE_DOMAIN=BOUNCE_DOMAIN)
        with Session(engine) as session:
            rows = {
                row.email_key: row
                for row in session.execute(
                    select(Deliverable.id, Deliverable.contact_id, Deliverable.message_id, Contact.email_key)
                    .join(Contact, Contact.id == Deliverable.contact_id)
                    .where(Deliverable.campaign_id == campaign_id)
                )
            }
        emails = []
        for mail_from, rcpt, message_id, list_unsubscribe in sorted(received, key=lambda r: r[1]):
            if not rcpt.startswith(prefix):
                continue
            row = rows[rcpt]
            assert row.message_id == message_id
            emails.append(Email(row.id, row.contact_id, rcpt, mail_from, message_id, list_unsubscribe))
        assert len(emails) == 20
        yield Sent(database_url, var_dir, emails)
    finally:
        drop_account(engine, account_id)


def state_of(engine: Engine, email: Email) -> tuple[str, bool, bool]:
    """(deliverable state, deliverable bounced, contact bounced)."""
    with Session(engine) as session:
        deliverable = session.get(Deliverable, email.deliverable_id)
        contact = session.get(Contact, email.contact_id)
        assert deliverable is not None and contact is not None
        return deliverable.state, deliverable.bounced_at is not None, contact.bounced_at is not None
