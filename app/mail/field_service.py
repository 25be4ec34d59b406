"""Custom contact fields: the definitions and values contact writes set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.db import upsert
from app.identity.principal import Principal
from app.kit.errors import Conflict, ValidationFailed
from app.kit.pagination import Paging
from app.kit.time import utcnow
from app.mail.common import owned, paginate
from app.mail.wire import ContactFieldOut, Page
from app.models import Contact, ContactField, ContactFieldValue

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


def fields_page(paging: Paging, session: Session, principal: Principal) -> Page[ContactFieldOut]:
    """GET /contact-fields: a page of the account's field definitions, oldest first."""
    query = (
        select(ContactField).where(ContactField.account_id == principal.account.id).order_by(ContactField.id)
    )
    paged = paginate(session, paging, query, FIELDS_PER_PAGE)
    return paged.as_page([ContactFieldOut.model_validate(row) for row in paged.rows])


@dataclass(frozen=True)
class CountedField:
    """A field and how many live contacts hold a value for it (the console's fields page)."""

    id: int
    name: str
    contact_count: int


def counted_fields(session: Session, account_id: int) -> list[CountedField]:
    """The account's fields, oldest first, each with how many live contacts hold a value for it."""
    counts = dict(
        session.execute(
            select(ContactFieldValue.field_id, func.count())
            .join(ContactField, ContactField.id == ContactFieldValue.field_id)
            .join(Contact, Contact.id == ContactFieldValue.contact_id)
            .where(ContactField.account_id == account_id, Contact.deleted_at.is_(None))
            .group_by(ContactFieldValue.field_id)
        ).all()
    )
    fields = session.scalars(
        select(ContactField).where(ContactField.account_id == account_id).order_by(ContactField.id)
    )
    return [CountedField(f.id, f.name, counts.get(f.id, 0)) for f in fields]


def find_field(session: Session, principal: Principal, field_id: int) -> ContactField:
    return owned(session, ContactField, field_id, principal.account.id, "Field not found.")


def _check_name_free(session: Session, account_id: int, name: str) -> None:
    taken = session.scalar(
        select(ContactField.id).where(ContactField.account_id == account_id, ContactField.name == name)
    )
    if taken is not None:
        raise Conflict(f"A field named {name} already exists.", code="field_exists")


def add_field(session: Session, principal: Principal, name: str) -> None:
    """A new field definition (a contact write makes one as well, on first use); 409 for a taken name."""
    _check_name_free(session, principal.account.id, name)
    ensure_fields(session, principal, [name])


def rename_field(session: Session, field: ContactField, name: str) -> None:
    """The field's new name; contacts keep their values. 409 when another field has that name."""
    if name != field.name:
        _check_name_free(session, field.account_id, name)
    field.name = name
    field.updated_at = utcnow()
    session.flush()


def delete_field(session: Session, field: ContactField) -> None:
    """The field and every contact's value for it."""
    session.execute(delete(ContactFieldValue).where(ContactFieldValue.field_id == field.id))
    session.delete(field)
    session.flush()
