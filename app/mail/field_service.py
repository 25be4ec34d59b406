"""Custom contact fields: the definitions and values contact writes set."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.db import upsert
from app.identity.principal import Principal
from app.kit.errors import ValidationFailed
from app.mail.common import paginate
from app.models import ContactField, ContactFieldValue

MAX_FIELDS_PER_ACCOUNT = 100
FIELDS_PER_PAGE = 20


def ensure_fields(session: Session, principal: Principal, names: list[str]) -> dict[str, int]:
    """Field ids by name; unknown names become new definitions, at most 100 per account (422 past it)."""
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return {}
    account_id = principal.account.id
    existing = dict(
        session.execute(
            select(ContactField.name, ContactField.id).where(
                ContactField.account_id == account_id, ContactField.name.in_(wanted)
            )
        ).all()
    )
    missing = [n for n in wanted if n not in existing]
    if missing:
        count = session.scalar(select(func.count()).where(ContactField.account_id == account_id)) or 0
        if count + len(missing) > MAX_FIELDS_PER_ACCOUNT:
            raise ValidationFailed(
                {"contact_fields": [f"An account has at most {MAX_FIELDS_PER_ACCOUNT} contact fields."]}
            )
        for name in missing:
            field = ContactField(account_id=account_id, user_id=principal.user.id, name=name)
            session.add(field)
            session.flush()
            existing[name] = field.id
    return existing


def set_field_values(
    session: Session, principal: Principal, values_by_contact: dict[int, dict[str, str | None]]
) -> None:
    """Write custom field values; a null value removes that field from the contact."""
    names = [name for values in values_by_contact.values() for name in values]
    field_ids = ensure_fields(session, principal, names)
    rows: list[dict[str, Any]] = []
    for contact_id, values in values_by_contact.items():
        for name, value in values.items():
            if value is None:
                session.execute(
                    delete(ContactFieldValue).where(
                        ContactFieldValue.contact_id == contact_id,
                        ContactFieldValue.field_id == field_ids[name],
                    )
                )
            else:
                rows.append({"contact_id": contact_id, "field_id": field_ids[name], "value": value})
    if rows:
        stmt = upsert(session, ContactFieldValue)
        session.execute(
            stmt.on_conflict_do_update(
                index_elements=["contact_id", "field_id"], set_={"value": stmt.excluded.value}
            ),
            rows,
        )


def fields_page(request: Request, session: Session, principal: Principal) -> dict[str, Any]:
    """GET /contact-fields: a page of the account's field definitions, oldest first."""
    query = (
        select(ContactField).where(ContactField.account_id == principal.account.id).order_by(ContactField.id)
    )
    paged = paginate(session, request, query, FIELDS_PER_PAGE)
    return paged.envelope(paged.rows)
