"""The suppression list: one per account, of addresses never sent to again by any campaign or automation.

What goes on it: every hard bounce (a bounce report, or a 5xx at the SMTP dialogue) and every spam
complaint, by the contact's address, and the addresses an integrator adds with `POST /suppressions`.
It is keyed by the lowercased address (as contacts are), not by contact: a contact deleted and imported
again, or an address added before it ever was a contact, stays suppressed.

Where it is honoured: in the SQL that chooses recipients (`not_suppressed`, used by the campaign
fan-out and the automation queue), and again when a worker claims an email (queue.claim_batch cancels a
queued email whose address was suppressed after it was queued). Adding an address by the API also
cancels the account's emails already queued for it.

`DELETE /suppressions/{email}` takes an address off the list; a contact with that address whose hard
bounce put it there is sendable again (its bounced mark is cleared). An unsubscribed contact stays
unsubscribed: leaving the list does not subscribe anyone.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, String, delete, exists, literal, select, update
from sqlalchemy.orm import Session

from app.db import among, upsert
from app.identity.principal import Principal
from app.kit.errors import NotFound, ValidationFailed
from app.kit.pagination import Paging
from app.kit.time import utcnow
from app.mail.common import paginate
from app.mail.specs import MAX_EMAIL_LENGTH, SuppressionCreate
from app.mail.wire import Page, SuppressionOut
from app.models import Contact, Deliverable, DeliverableState, Suppression
from app.models.base import UTCDateTime

SUPPRESSIONS_PER_PAGE = 100


def not_suppressed(account_id: Any, email_key: Any) -> ColumnElement[bool]:
    """True for an address (a column or value of the account's key) not on the account's list; one
    index lookup of (account_id, email_key) a row."""
    return ~exists(
        select(Suppression.id).where(Suppression.account_id == account_id, Suppression.email_key == email_key)
    )


def suppress_contacts(session: Session, contact_ids: Iterable[int], reason: str, now: datetime) -> None:
    """Put the contacts' addresses on their accounts' lists (one INSERT ... SELECT); an address listed
    already keeps its first reason."""
    ids = sorted(set(contact_ids))
    if not ids:
        return
    rows = select(
        Contact.account_id,
        Contact.email,
        Contact.email_key,
        literal(reason),
        literal(now, UTCDateTime()),
    ).where(Contact.id.in_(ids))
    session.execute(
        upsert(session, Suppression)
        .from_select(["account_id", "email", "email_key", "reason", "created_at"], rows)
        .on_conflict_do_nothing(index_elements=["account_id", "email_key"])
    )


def add_suppressions(
    session: Session, principal: Principal, body: SuppressionCreate, reason: str = "api"
) -> tuple[int, int]:
    """POST /suppressions: (how many were added, how many were listed already). Emails already queued
    for the addresses are cancelled. `reason` is `api`, or `console` for addresses added there."""
    addresses = body.addresses()
    if not addresses:
        required = "The email field is required when emails is not present."
        raise ValidationFailed({"email": [required]}, status=422)
    account_id = principal.account.id
    by_key: dict[str, str] = {}
    for address in addresses:
        by_key.setdefault(address.lower(), address)
    now = utcnow()
    added = session.scalars(
        upsert(session, Suppression)
        .on_conflict_do_nothing(index_elements=["account_id", "email_key"])
        .returning(Suppression.email_key),
        [
            {"account_id": account_id, "email": email, "email_key": key, "reason": reason, "created_at": now}
            for key, email in by_key.items()
        ],
    ).all()
    keys = list(by_key)
    session.execute(
        update(Deliverable)
        .where(
            Deliverable.state == DeliverableState.QUEUED,
            Deliverable.contact_id.in_(
                select(Contact.id).where(
                    Contact.account_id == account_id, among(session, Contact.email_key, keys, String())
                )
            ),
        )
        .values(state=DeliverableState.CANCELLED, error="the address is suppressed", updated_at=now)
        .execution_options(synchronize_session=False)
    )
    return len(added), len(by_key) - len(added)


def suppressions_query(account_id: int, search: str = "") -> Select[Suppression]:
    """The account's list, oldest first; with `search`, the addresses containing it (any case)."""
    query = select(Suppression).where(Suppression.account_id == account_id)
    if search:
        query = query.where(Suppression.email_key.contains(search.lower(), autoescape=True))
    return query.order_by(Suppression.id)


def suppressions_page(session: Session, paging: Paging, principal: Principal) -> Page[SuppressionOut]:
    """GET /suppressions: the account's list, oldest first, a page of 100 (the email API's envelope)."""
    query = suppressions_query(principal.account.id)
    paged = paginate(session, paging, query, SUPPRESSIONS_PER_PAGE)
    return paged.as_page([SuppressionOut.model_validate(row) for row in paged.rows])


def remove_suppression(session: Session, principal: Principal, email: str) -> None:
    """DELETE /suppressions/{email}: off the list (404 when it is not on it); a hard-bounced contact with
    the address may be sent to again."""
    key = email.strip().lower()
    if not key or len(key) > MAX_EMAIL_LENGTH or "\x00" in key:
        raise NotFound("Suppression not found.")
    account_id = principal.account.id
    removed = session.execute(
        delete(Suppression)
        .where(Suppression.account_id == account_id, Suppression.email_key == key)
        .returning(Suppression.id)
    ).first()
    if removed is None:
        raise NotFound("Suppression not found.")
    now = utcnow()
    session.execute(
        update(Contact)
        .where(Contact.account_id == account_id, Contact.email_key == key, Contact.bounced_at.is_not(None))
        .values(bounced_at=None, updated_at=now)
        .execution_options(synchronize_session=False)
    )
