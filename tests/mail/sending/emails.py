"""Helpers of the tracking tests: the signed links of a received email, a worker with its own clock,
and rows read straight from the database."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import SmtpTransport
from app.mail.sending.worker import SendConfig, SendWorker
from app.models import Contact, Deliverable
from tests.mail.sending.conftest import Received, Sender, SmtpSink

PIXEL = re.compile(r'<img src="([^"]*/t/o/[^"]+)"')
CLICK = re.compile(r'href="([^"]*/t/c/[^"]+)"')


@dataclass(frozen=True)
class Links:
    """Paths (no scheme or host: the test client serves them) of one email's signed links."""

    pixel: str
    clicks: list[str]
    unsubscribe: str
    message_id: str


def links_in(received: Received) -> Links:
    html = received.part("html")
    pixel = PIXEL.search(html)
    assert pixel is not None, html
    header = received.message["List-Unsubscribe"]
    unsubscribe = re.search(r"<(https?://[^>]+)>", str(header))
    assert unsubscribe is not None, header
    return Links(
        pixel=_path(pixel.group(1)),
        clicks=[_path(url) for url in CLICK.findall(html)],
        unsubscribe=_path(unsubscribe.group(1)),
        message_id=str(received.message["Message-ID"]),
    )


def _path(url: str) -> str:
    return urlsplit(url.replace("&amp;", "&")).path


def worker_at(
    settings: Settings, session_factory: sessionmaker[Session], smtp_sink: SmtpSink, moment: datetime
) -> Sender:
    """A send worker whose clock stands at `moment`: it sends what is due by then."""
    transport = SmtpTransport(smtp_sink.url, size=4)
    tokens = MailTokens(settings.resolved_secret_key)
    worker = SendWorker(
        SendConfig.from_settings(settings), session_factory, transport, tokens, lambda: moment
    )
    return Sender(worker, transport, tokens)


def deliverables_of(db: Session, contact_email: str) -> list[Any]:
    """The contact's deliverables as fresh rows (never the session's cached objects), oldest first."""
    return list(
        db.execute(
            select(
                Deliverable.id,
                Deliverable.campaign_id,
                Deliverable.state,
                Deliverable.send_after,
                Deliverable.sent_at,
                Deliverable.opened_at,
                Deliverable.clicked_at,
                Deliverable.bounced_at,
                Deliverable.unsubscribed_at,
                Deliverable.spam_at,
            )
            .join(Contact, Contact.id == Deliverable.contact_id)
            .where(Contact.email_key == contact_email.lower())
            .order_by(Deliverable.id)
        )
    )


def contact_id_of(client: TestClient, headers: dict[str, str], email: str) -> int:
    response = client.get("/contacts", params={"email": email}, headers=headers)
    assert response.status_code == 200, response.text
    return int(response.json()["data"][0]["id"])


def stats_of(client: TestClient, headers: dict[str, str], campaign_id: int) -> dict[str, Any]:
    response = client.get(f"/campaigns/{campaign_id}/stats", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body
