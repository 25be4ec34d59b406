"""Fixtures of the delivery tests: a send worker over the loopback SMTP server (tests/smtp_sink.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy.orm import Session as DbSession
from sqlalchemy.orm import sessionmaker

from app.config import Settings
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import SmtpTransport
from app.mail.sending.worker import SendConfig, SendWorker
from tests.smtp_sink import Received, SmtpSink

__all__ = ["Received", "Sender", "SmtpSink", "campaign_with_list"]


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
