"""Contacts: the one upsert every contact write goes through, and the list membership and unsubscribe
services the other ways in (forms, tracking links, bounces) share. The listings are contact_listing.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Select,
    String,
    bindparam,
    delete,
    func,
    literal,
    null,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from app.db import among, upsert
from app.identity.principal import Principal
from app.kit.errors import DomainError, NotFound, ValidationFailed
from app.kit.pagination import Paging
from app.kit.time import utcnow
from app.mail.automations.automation_runs import on_lists_joined
from app.mail.common import check_list_ids, live_list_ids_among, owned, paginate
from app.mail.events.emit import ContactEvent, emit_contact_events, emit_per_account
from app.mail.events.types import EventType
from app.mail.field_service import set_field_values
from app.mail.specs import BatchContact, ContactCreate, ContactFieldIn, ContactUpdate
from app.mail.wire import ContactActivityOut, ContactActivitySummary, DeliverableActivity, row_wire
from app.models import (
    Account,
    Campaign,
    Contact,
    ContactField,
    ContactFieldValue,
    ContactList,
    Deliverable,
    DeliverableState,
    ListMembership,
)

ACTIVITY_PER_PAGE = 100


@dataclass
class ContactWrite:
    email: str
    first_name: str | None = None
    last_name: str | None = None
    ip_address: str | None = None
    lists: list[int] = field(default_factory=list)
    fields: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class UpsertResult:
    created: int
    updated: int
    ids_by_key: dict[str, int]


class ContactLimitExceeded(DomainError):
    def __init__(self, limit: int) -> None:
        super().__init__(402, f"Contact limit of {limit} reached. Upgrade your plan to add more contacts.")


# The columns an upsert writes, in the order _unnested_rows() selects them.
_UPSERT_COLUMNS = ["account_id", "email", "email_key", "first_name", "last_name", "ip_address"]
_UPSERT_COLUMNS += ["created_at", "updated_at"]


def _unnested_rows(account_id: int, now: datetime, merged: dict[str, ContactWrite]) -> Select[Any]:
    """PostgreSQL: the rows to upsert as a SELECT over unnest() of one array a column."""
    writes = list(merged.values())

    def array(values: list[str | None]) -> Any:
        return bindparam(None, values, type_=postgresql.ARRAY(String))

    unnested = (
        func.unnest(
            array([w.email for w in writes]),
            array(list(merged)),
            array([w.first_name for w in writes]),
            array([w.last_name for w in writes]),
            array([w.ip_address for w in writes]),
        )
        .table_valued(*_UPSERT_COLUMNS[1:6])
        .render_derived()
    )
    stamp = literal(now, Contact.__table__.c.created_at.type)
    return select(literal(account_id), *unnested.c, stamp, stamp)


def upsert_contacts(
    session: Session,
    principal: Principal,
    writes: list[ContactWrite],
    *,
    validation_status: int,
    lists_field: Callable[[int], str] = lambda index: "lists",
) -> UpsertResult:
    """Create or update contacts by email (case-insensitive), as one multi-row upsert.

    Given names overwrite, missing ones are kept; unsubscribed_at is never cleared; a soft-deleted
    contact with the address comes back (and counts as new against the contact limit). List ids are
    added to the contact's memberships. 402 when the new contacts would pass the account's limit.
    An unknown list id is a validation error named by `lists_field(index of the write)`.
    """
    account_id = principal.account.id
    _check_list_ids(session, account_id, writes, validation_status, lists_field)
    merged = _merged_by_key(writes)
    if not merged:
        return UpsertResult(0, 0, {})
    created = _make_room(session, account_id, merged)
    now = utcnow()
    ids_by_key = _upsert_rows(session, account_id, merged, now)

    joins = [(ids_by_key[key], i) for key, write in merged.items() for i in dict.fromkeys(write.lists)]
    add_memberships(session, account_id, joins, now)
    field_values = {ids_by_key[key]: write.fields for key, write in merged.items() if write.fields}
    if field_values:
        set_field_values(session, principal, field_values)
    if created:
        session.execute(
            update(Account)
            .where(Account.id == account_id)
            .values(
                contacts_count=Account.contacts_count + created,
                contacts_version=Account.contacts_version + 1,
            )
        )
    return UpsertResult(created=created, updated=len(merged) - created, ids_by_key=ids_by_key)


def _check_list_ids(
    session: Session,
    account_id: int,
    writes: list[ContactWrite],
    validation_status: int,
    lists_field: Callable[[int], str],
) -> None:
    """Every list id of every write names a live list of the account (a validation error otherwise)."""
    found = live_list_ids_among(session, account_id, [i for write in writes for i in write.lists])
    errors = {
        f"{lists_field(index)}.{position}": [f"The selected {lists_field(index)}.{position} is invalid."]
        for index, write in enumerate(writes)
        for position, list_id in enumerate(write.lists)
        if list_id not in found
    }
    if errors:
        raise ValidationFailed(errors, status=validation_status)


def _merged_by_key(writes: list[ContactWrite]) -> dict[str, ContactWrite]:
    """One write per lowercased address: a later write's given values win, its lists and fields add up."""
    merged: dict[str, ContactWrite] = {}
    for write in writes:
        key = write.email.lower()
        earlier = merged.get(key)
        if earlier is not None:
            write.lists = [*earlier.lists, *write.lists]
            write.fields = {**earlier.fields, **write.fields}
            for name in ("first_name", "last_name", "ip_address"):
                if getattr(write, name) is None:
                    setattr(write, name, getattr(earlier, name))
        merged[key] = write
    return merged


def _make_room(session: Session, account_id: int, merged: dict[str, ContactWrite]) -> int:
    """How many of the contacts are new (restored ones included), 402 past the account's limit; a
    restored contact loses its old lists and fields first."""
    # The account row lock orders concurrent writers, so the count below and the limit check agree.
    limit = session.execute(
        select(Account.contacts_count, Account.contact_limit)
        .where(Account.id == account_id)
        .with_for_update()
    ).one()
    known = dict(
        session.execute(
            select(Contact.email_key, Contact.deleted_at).where(
                Contact.account_id == account_id, among(session, Contact.email_key, list(merged), String())
            )
        ).all()
    )
    restored_keys = [key for key, deleted_at in known.items() if deleted_at is not None]
    created = len(merged) - len(known) + len(restored_keys)
    if created and limit.contacts_count + created > limit.contact_limit:
        raise ContactLimitExceeded(limit.contact_limit)
    if restored_keys:
        # A contact that comes back starts with no lists and fields, like a new one.
        restored_ids = select(Contact.id).where(
            Contact.account_id == account_id, Contact.email_key.in_(restored_keys)
        )
        session.execute(delete(ListMembership).where(ListMembership.contact_id.in_(restored_ids)))
        session.execute(delete(ContactFieldValue).where(ContactFieldValue.contact_id.in_(restored_ids)))
    return created


def _upsert_rows(
    session: Session, account_id: int, merged: dict[str, ContactWrite], now: datetime
) -> dict[str, int]:
    """The one INSERT ... ON CONFLICT of the contacts' rows; their ids by lowercased address."""
    table = Contact.__table__
    stmt = upsert(session, table)
    rows: list[dict[str, Any]] = []
    if session.get_bind().dialect.name == "postgresql":
        # One parameter a column, not eight a row: a 1000-row VALUES list costs far more to build and to
        # parse (client side) than the insert itself.
        stmt = stmt.from_select(_UPSERT_COLUMNS, _unnested_rows(account_id, now, merged))
    else:
        rows = [
            {
                "account_id": account_id,
                "email": write.email,
                "email_key": key,
                "first_name": write.first_name,
                "last_name": write.last_name,
                "ip_address": write.ip_address,
                "created_at": now,
                "updated_at": now,
            }
            for key, write in merged.items()
        ]
    stmt = stmt.on_conflict_do_update(
        index_elements=["account_id", "email_key"],
        set_={
            "first_name": func.coalesce(stmt.excluded.first_name, table.c.first_name),
            "last_name": func.coalesce(stmt.excluded.last_name, table.c.last_name),
            "ip_address": func.coalesce(stmt.excluded.ip_address, table.c.ip_address),
            # null(), not None: SQLAlchemy takes a None here for a per-row parameter and then sends the
            # rows one statement each (with RETURNING) instead of as one multi-row INSERT.
            "deleted_at": null(),
            "updated_at": now,
        },
    ).returning(table.c.id, table.c.email_key)
    result = session.execute(stmt, rows) if rows else session.execute(stmt)
    return {key: contact_id for contact_id, key in result}


def live_contacts(account_id: int) -> Select[Contact]:
    return select(Contact).where(Contact.account_id == account_id, Contact.deleted_at.is_(None))


def add_memberships(session: Session, account_id: int, pairs: list[tuple[int, int]], now: datetime) -> None:
    """Put contacts on lists ((contact_id, list_id) pairs of one account; existing memberships stay
    as they are) and fire the apply_list automations of the memberships that are new.

    Every way onto a list goes through here, so automations see each join exactly once.
    """
    if not pairs:
        return
    new = session.execute(
        upsert(session, ListMembership)
        .on_conflict_do_nothing()
        .returning(ListMembership.contact_id, ListMembership.list_id),
        [{"contact_id": contact_id, "list_id": list_id, "created_at": now} for contact_id, list_id in pairs],
    ).all()
    on_lists_joined(session, account_id, [(contact_id, list_id) for contact_id, list_id in new], now)
    joined = [ContactEvent(contact_id, list_id=list_id) for contact_id, list_id in new]
    emit_contact_events(session, account_id, EventType.CONTACT_SUBSCRIBED, joined, now)


def replace_memberships(
    session: Session, account_id: int, contact_id: int, list_ids: list[int], now: datetime
) -> None:
    """The contact's lists become exactly `list_ids`: dropped ones go, kept ones keep their join time."""
    session.execute(
        delete(ListMembership).where(
            ListMembership.contact_id == contact_id, ListMembership.list_id.not_in(list_ids)
        )
    )
    add_memberships(session, account_id, [(contact_id, list_id) for list_id in list_ids], now)


def cancel_queued(session: Session, *contact_ids: int) -> None:
    if not contact_ids:
        return
    session.execute(
        update(Deliverable)
        .where(Deliverable.contact_id.in_(contact_ids), Deliverable.state == DeliverableState.QUEUED)
        .values(state=DeliverableState.CANCELLED, updated_at=utcnow())
    )


def unsubscribe_contacts(session: Session, contact_ids: list[int], now: datetime) -> list[int]:
    """Unsubscribe those of the contacts still subscribed and cancel their queued emails; returns
    the ids that changed (an unsubscribe link or a report for an unsubscribed contact changes nothing)."""
    if not contact_ids:
        return []
    rows = session.execute(
        update(Contact)
        .where(Contact.id.in_(contact_ids), Contact.unsubscribed_at.is_(None))
        .values(unsubscribed_at=now, updated_at=now)
        .returning(Contact.id, Contact.account_id)
        .execution_options(synchronize_session=False)
    ).all()
    changed = [row.id for row in rows]
    cancel_queued(session, *changed)
    left = [(row.account_id, ContactEvent(row.id)) for row in rows]
    emit_per_account(session, EventType.CONTACT_UNSUBSCRIBED, left, now)
    return changed


def _fields_of(items: list[ContactFieldIn]) -> dict[str, str | None]:
    return {item.name: item.value for item in items}


def write_of(body: ContactCreate | BatchContact) -> ContactWrite:
    """The write a POST /contacts body (or an item of a batch) asks for."""
    return ContactWrite(
        email=body.email,
        first_name=body.first_name,
        last_name=body.last_name,
        ip_address=body.ip_address,
        lists=body.lists,
        fields=_fields_of(body.contact_fields),
    )


def upsert_contact(session: Session, principal: Principal, write: ContactWrite) -> Contact:
    """POST /contacts: one write through `upsert_contacts`, and the contact as it now is."""
    result = upsert_contacts(session, principal, [write], validation_status=400)
    contact = session.get_one(Contact, result.ids_by_key[write.email.lower()])
    session.refresh(contact)
    return contact


def find_contact(session: Session, principal: Principal, contact_id: int) -> Contact:
    """A contact of the account (a deleted one too, as GET /contacts/{id} has always shown), or 404."""
    return owned(session, Contact, contact_id, principal.account.id, "Contact not found.")


def update_contact(session: Session, principal: Principal, contact: Contact, body: ContactUpdate) -> Contact:
    """PATCH /contacts/{id}: given names replace, given lists become the contact's lists exactly."""
    if "first_name" in body.model_fields_set:
        contact.first_name = body.first_name
    if "last_name" in body.model_fields_set:
        contact.last_name = body.last_name
    if body.lists is not None:
        list_ids = check_list_ids(session, principal.account.id, body.lists, "lists", 422)
        replace_memberships(session, principal.account.id, contact.id, list_ids, utcnow())
    if body.contact_fields:
        set_field_values(session, principal, {contact.id: _fields_of(body.contact_fields)})
    contact.updated_at = utcnow()
    session.flush()
    return contact


def delete_contact(session: Session, principal: Principal, contact: Contact) -> None:
    """Soft delete: the contact's queued emails are cancelled and the account's count goes down."""
    contact.deleted_at = utcnow()
    cancel_queued(session, contact.id)
    session.execute(
        update(Account)
        .where(Account.id == principal.account.id)
        .values(contacts_count=Account.contacts_count - 1, contacts_version=Account.contacts_version + 1)
    )
    session.flush()


def activity_summary(session: Session, contact: Contact) -> ContactActivitySummary:
    """When the contact was last sent, opened and clicked, and whether it left or bounced."""
    summary = session.execute(
        select(
            func.max(Deliverable.sent_at),
            func.max(Deliverable.opened_at),
            func.max(Deliverable.clicked_at),
        ).where(Deliverable.contact_id == contact.id)
    ).one()
    return ContactActivitySummary(
        last_sent_at=summary[0],
        last_opened_at=summary[1],
        last_clicked_at=summary[2],
        unsubscribed_at=contact.unsubscribed_at,
        bounced_at=contact.bounced_at,
    )


def activity_query(contact: Contact) -> Select[Deliverable]:
    """The contact's emails (cancelled ones aside), newest first."""
    return (
        select(Deliverable)
        .where(Deliverable.contact_id == contact.id, Deliverable.state != DeliverableState.CANCELLED)
        .order_by(Deliverable.id.desc())
    )


def activity_wire(session: Session, deliverables: list[Deliverable]) -> list[DeliverableActivity]:
    """Emails of a contact as the activity lists them, with their campaigns' titles."""
    titles = dict(
        session.execute(
            select(Campaign.id, Campaign.title).where(Campaign.id.in_({d.campaign_id for d in deliverables}))
        ).all()
    )
    return [
        row_wire(DeliverableActivity, d, campaign_title=titles.get(d.campaign_id, "")) for d in deliverables
    ]


def contact_activity(session: Session, paging: Paging, contact: Contact) -> ContactActivityOut:
    """GET /contacts/{id}/activity: the latest sends, opens and clicks, and a page of its emails."""
    paged = paginate(session, paging, activity_query(contact), ACTIVITY_PER_PAGE)
    return ContactActivityOut(
        contact=activity_summary(session, contact),
        deliverables=paged.as_page(activity_wire(session, paged.rows)),
    )


def live_contacts_among(session: Session, account_id: int, contact_ids: list[int]) -> list[Contact]:
    """Those of the ids that name live contacts of the account (a selection sent by a form)."""
    return list(session.scalars(live_contacts(account_id).where(Contact.id.in_(contact_ids))))


def latest_activity(session: Session, contact: Contact) -> list[DeliverableActivity]:
    """The contact's latest ACTIVITY_PER_PAGE emails, as GET /contacts/{id}/activity lists them."""
    deliverables = list(session.scalars(activity_query(contact).limit(ACTIVITY_PER_PAGE)))
    return activity_wire(session, deliverables)


def contact_lists_and_fields(session: Session, contact: Contact) -> tuple[list[int], dict[str, str]]:
    """The live lists the contact is on (their ids) and its custom field values by field name."""
    list_ids = list(
        session.scalars(
            select(ListMembership.list_id)
            .join(ContactList, ContactList.id == ListMembership.list_id)
            .where(ListMembership.contact_id == contact.id, ContactList.deleted_at.is_(None))
            .order_by(ListMembership.list_id)
        )
    )
    values = session.execute(
        select(ContactField.name, ContactFieldValue.value)
        .join(ContactField, ContactField.id == ContactFieldValue.field_id)
        .where(ContactFieldValue.contact_id == contact.id)
        .order_by(ContactField.name)
    ).all()
    return list_ids, {name: value for name, value in values}


def join_lists(session: Session, account_id: int, contact_ids: list[int], list_id: int) -> None:
    """Put live contacts of the account on one of its lists (the console's "add to list"), 422 for a
    list that is not the account's."""
    check_list_ids(session, account_id, [list_id], "list", 422)
    live = session.scalars(
        live_contacts(account_id).with_only_columns(Contact.id).where(Contact.id.in_(contact_ids))
    )
    add_memberships(session, account_id, [(contact_id, list_id) for contact_id in live], utcnow())


def unsubscribe_by_email(session: Session, principal: Principal, email: str) -> Contact:
    """PATCH /unsubscribe: the live contact with the address unsubscribed (once), or 404."""
    contact = session.scalars(
        live_contacts(principal.account.id).where(Contact.email_key == email.lower())
    ).first()
    if contact is None:
        raise NotFound("Contact not found.")
    if contact.unsubscribed_at is None and unsubscribe_contacts(session, [contact.id], utcnow()):
        session.refresh(contact)
    return contact
