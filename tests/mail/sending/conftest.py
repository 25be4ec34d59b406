"""Fixtures of the delivery tests: a send worker over the loopback SMTP server (tests/smtp_sink.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine, delete, insert, select
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm import Session as DbSession

from app.config import Settings
from app.identity.accounts import create_user
from app.kit.time import utcnow
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import SmtpTransport
from app.mail.sending.worker import SendConfig, SendWorker
from app.models import Account, Campaign, CampaignList, Contact, ContactList, ListMembership
from tests.loops import Run, run
from tests.smtp_sink import Received, SmtpSink

__all__ = [
    "RECIPIENTS",
    "Received",
    "Run",
    "Sender",
    "SmtpSink",
    "campaign_with_list",
    "committed_campaign",
    "run",
]


@dataclass
class Sender:
    """Drives a real send worker over the test database and the loopback SMTP server."""

    worker: SendWorker
    transport: SmtpTransport
    tokens: MailTokens

    def drain(self) -> int:
        async def run() -> int:
            try:
                return await self.worker.drain()
            finally:
                await self.transport.close()

        return asyncio.run(run())

    def step(self) -> int:
        """One claim, send and record round (no fan-out)."""

        async def run() -> int:
            try:
                return await self.worker.run_once()
            finally:
                await self.transport.close()

        return asyncio.run(run())


@pytest.fixture
def sender(settings: Settings, session_factory: sessionmaker[DbSession], smtp_sink: SmtpSink) -> Sender:
    transport = SmtpTransport(smtp_sink.url, size=4)
    tokens = MailTokens(settings.resolved_secret_key)
    worker = SendWorker(SendConfig.from_settings(settings), session_factory, transport, tokens)
    return Sender(worker, transport, tokens)


def campaign_with_list(client: Any, headers: dict[str, str], emails: list[str], **campaign: Any) -> int:
    """A list holding `emails` and a draft campaign to it; returns the campaign id."""
    list_id = client.post("/lists", json={"name": "Readers"}, headers=headers).json()["id"]
    for address in emails:
        response = client.post("/contacts", json={"email": address, "lists": [list_id]}, headers=headers)
        assert response.status_code in (200, 201), response.text
    body = {
        "title": "Hello",
        "subject": 'Hello {{ first_name | "friend" }}',
        "html": '<html><body><p>Hi {{ first_name | "there" }}</p>'
        '<a href="https://example.com/a?x=1&amp;y=2">Read</a></body></html>',
        "from_name": "Tidings",
        "from_email": "news@example.com",
        "lists": [list_id],
        **campaign,
    }
    response = client.post("/campaigns", json=body, headers=headers)
    assert response.status_code in (200, 201), response.text
    return int(response.json()["id"])


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
