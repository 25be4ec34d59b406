"""Builders the email API tests share: one definition of "a list", "a campaign", "a contact"...

Two kinds. The `create_*` builders go through the API as a client does (a `TestClient` and an
`ApiUser`) and return the JSON answer, so what they make is exactly what a client would get. The
`add_*`/`make_*` builders write rows with the test's own session, for state no route makes directly
(deliverables in a given state, contacts by the thousand, a hosted form); they commit, so the app's
sessions see the rows. The shipped-process tests (a real `tidings serve` over HTTP) have their own
builders in tests/shipped.py.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.mail.form_service import create_form
from app.models import Campaign, Contact, Deliverable
from tests.conftest import ApiUser
from tests.upstream import Upstream


def created(response: Any, status: int) -> dict[str, Any]:
    """The JSON body of an answer that must have the given status (its text in the failure otherwise)."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    return body


# ------------------------------------------------------------------------------------ through the API


def create_list(client: TestClient, user: ApiUser, name: str = "Newsletter") -> dict[str, Any]:
    return created(client.post("/lists", json={"name": name}, headers=user.headers), 200)


def create_contact(
    client: TestClient, user: ApiUser, email: str = "ann@example.com", **body: Any
) -> dict[str, Any]:
    return created(client.post("/contacts", json={"email": email, **body}, headers=user.headers), 200)


def campaign_body(**overrides: Any) -> dict[str, Any]:
    """A valid `POST /campaigns` body; keyword arguments replace or add fields."""
    body: dict[str, Any] = {
        "title": "Spring news",
        "subject": "What is new this spring",
        "html": "<p>Hello there</p>",
        "from_name": "Ann Sender",
        "from_email": "ann@example.com",
    }
    body.update(overrides)
    return body


def create_campaign(client: TestClient, user: ApiUser, **overrides: Any) -> dict[str, Any]:
    return created(client.post("/campaigns", json=campaign_body(**overrides), headers=user.headers), 201)


def create_automation(client: TestClient, user: ApiUser, **body: Any) -> dict[str, Any]:
    answer = client.post("/automations", json={"title": "Welcome series", **body}, headers=user.headers)
    return created(answer, 201)


# ------------------------------------------------------------------------------------- rows directly


def add_contacts(db: Session, account_id: int, count: int, prefix: str = "reader") -> list[int]:
    """`count` contacts `{prefix}{i}@example.com` in the account; their ids, in order."""
    contacts = [
        Contact(account_id=account_id, email=f"{prefix}{i}@example.com", email_key=f"{prefix}{i}@example.com")
        for i in range(count)
    ]
    db.add_all(contacts)
    db.flush()
    ids = [contact.id for contact in contacts]
    db.commit()
    return ids


def add_campaign(db: Session, account_id: int, title: str = "Spring sale") -> int:
    """A draft campaign row (no lists); its id."""
    campaign = Campaign(
        account_id=account_id,
        title=title,
        subject="Hello",
        html="<p>Hello</p>",
        from_name="Sender",
        from_email="sender@example.com",
    )
    db.add(campaign)
    db.flush()
    campaign_id = campaign.id
    db.commit()
    return campaign_id


def add_deliverable(db: Session, account_id: int, campaign_id: int, contact_id: int, **fields: Any) -> int:
    """One campaign email to one contact, with any column set (`state`, `sent_at`, `opened_at`...); its id."""
    deliverable = Deliverable(account_id=account_id, campaign_id=campaign_id, contact_id=contact_id, **fields)
    db.add(deliverable)
    db.flush()
    deliverable_id = deliverable.id
    db.commit()
    return deliverable_id


def make_form(db: Session, account_id: int, title: str, list_ids: list[int]) -> int:
    """A hosted sign-up form subscribing to the lists, as `tidings forms create` makes one; its id."""
    form = create_form(db, account_id, title, list_ids)
    db.commit()
    return form.id


def count_rows(db: Session, model: Any) -> int:
    """How many rows the model's table holds now (the session's cache dropped first)."""
    db.expire_all()
    return int(db.scalar(select(func.count()).select_from(model)) or 0)


# --------------------------------------------------------------------------------------- feed sources


def rss_source(upstream: Upstream, path: str = "/feed.xml", **extra: Any) -> dict[str, Any]:
    """A `/v1/feeds` source reading the RSS document the loopback upstream serves at `path`."""
    return {"spec": {"kind": "rss", "url": upstream.url(path), "name": "Local"}, **extra}
