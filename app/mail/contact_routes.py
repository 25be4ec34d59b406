"""The /contacts routes and PATCH /unsubscribe."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import (
    func,
    select,
    update,
)

from app.db import SessionDep
from app.identity.dependencies import PaidMailUser
from app.identity.principal import Principal
from app.kit.errors import NotFound
from app.kit.time import utcnow
from app.mail.common import (
    RowId,
    check_list_ids,
    owned,
    paginate,
)
from app.mail.contact_service import (
    ACTIVITY_PER_PAGE,
    ContactWrite,
    account_contacts_page,
    cancel_queued,
    contact_listing,
    contacts_matching,
    live_contacts,
    replace_memberships,
    search,
    upsert_contacts,
)
from app.mail.field_service import set_field_values
from app.mail.input import MailInput, validate
from app.mail.schemas import BatchResultOut, ContactActivityOut, ContactOut, ErrorOut, MessageOut, Page
from app.mail.specs import (
    ContactBatch,
    ContactCreate,
    ContactFieldIn,
    ContactFilter,
    ContactUpdate,
    EmailOnly,
)
from app.models import Account, Campaign, Contact, Deliverable

router = APIRouter(tags=["Contacts"])


def _fields_of(items: list[ContactFieldIn]) -> dict[str, str | None]:
    return {item.name: item.value for item in items}


# ---------------------------------------------------------------------------------------------- routes


@router.get("/contacts", response_model=Page[ContactOut], summary="List contacts")
async def list_contacts(request: Request, principal: PaidMailUser, raw: MailInput) -> Response:
    # No SessionDep: the hot path (PostgreSQL, no filters) needs no session, and the other opens a
    # read-only one of its own in a worker thread.
    filters = validate(ContactFilter, raw, status=422)
    filtered = filters.query or filters.email or filters.unsubscribed is not None
    pool: AsyncConnectionPool | None = request.app.state.async_pool
    if pool is not None and not filtered:
        return await account_contacts_page(pool, request, principal.account)
    return await run_in_threadpool(list_contacts_in_session, request, principal, filters)


def list_contacts_in_session(request: Request, principal: Principal, filters: ContactFilter) -> Response:
    with request.app.state.read_session_factory() as session:
        return contacts_matching(request, session, principal, filters)


@router.post(
    "/contacts",
    response_model=ContactOut,
    summary="Create or update a contact",
    responses={400: {"model": ErrorOut}, 402: {"model": ErrorOut}},
)
def create_contact(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> Contact:
    body = validate(ContactCreate, raw, status=400)
    write = ContactWrite(
        email=body.email,
        first_name=body.first_name,
        last_name=body.last_name,
        ip_address=body.ip_address,
        lists=body.lists,
        fields=_fields_of(body.contact_fields),
    )
    result = upsert_contacts(session, principal, [write], validation_status=400)
    contact = session.get_one(Contact, result.ids_by_key[body.email.lower()])
    session.refresh(contact)
    return contact


@router.post(
    "/contacts/batch",
    response_model=BatchResultOut,
    summary="Create or update up to 1000 contacts",
    responses={402: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def batch_contacts(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> BatchResultOut:
    body = validate(ContactBatch, raw, status=422)
    writes = [
        ContactWrite(
            email=item.email,
            first_name=item.first_name,
            last_name=item.last_name,
            ip_address=item.ip_address,
            lists=item.lists,
            fields=_fields_of(item.contact_fields),
        )
        for item in body.contacts
    ]
    result = upsert_contacts(
        session, principal, writes, validation_status=422, lists_field=lambda index: f"contacts.{index}.lists"
    )
    return BatchResultOut(created=result.created, updated=result.updated)


@router.get("/contacts/unsubscribed", response_model=Page[ContactOut], summary="List unsubscribed contacts")
def list_unsubscribed(
    request: Request, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> Response:
    filters = validate(ContactFilter, raw, status=422)
    query = search(live_contacts(principal.account.id), filters.query).where(
        Contact.unsubscribed_at.is_not(None)
    )
    return contact_listing(session, request, query.order_by(Contact.id))


@router.get(
    "/contacts/{id}", response_model=ContactOut, summary="Get a contact", responses={404: {"model": ErrorOut}}
)
def get_contact(id: RowId, session: SessionDep, principal: PaidMailUser) -> Contact:
    return owned(session, Contact, id, principal.account.id, "Contact not found.")


@router.patch(
    "/contacts/{id}",
    response_model=ContactOut,
    summary="Update a contact",
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def update_contact(id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput) -> Contact:
    contact = owned(session, Contact, id, principal.account.id, "Contact not found.")
    body = validate(ContactUpdate, raw, status=422)
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


@router.delete(
    "/contacts/{id}",
    response_model=MessageOut,
    summary="Delete a contact",
    responses={404: {"model": ErrorOut}},
)
def delete_contact(id: RowId, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    contact = owned(session, Contact, id, principal.account.id, "Contact not found.")
    contact.deleted_at = utcnow()
    cancel_queued(session, contact.id)
    session.execute(
        update(Account)
        .where(Account.id == principal.account.id)
        .values(contacts_count=Account.contacts_count - 1, contacts_version=Account.contacts_version + 1)
    )
    session.flush()
    return MessageOut(message="Contact deleted.")


@router.get(
    "/contacts/{id}/activity",
    response_model=ContactActivityOut,
    summary="A contact's sending history",
    responses={404: {"model": ErrorOut}},
)
def contact_activity(
    id: RowId, request: Request, session: SessionDep, principal: PaidMailUser
) -> dict[str, Any]:
    contact = owned(session, Contact, id, principal.account.id, "Contact not found.")
    summary = session.execute(
        select(
            func.max(Deliverable.sent_at),
            func.max(Deliverable.opened_at),
            func.max(Deliverable.clicked_at),
        ).where(Deliverable.contact_id == contact.id)
    ).one()
    query = (
        select(Deliverable)
        .where(Deliverable.contact_id == contact.id, Deliverable.state != "cancelled")
        .order_by(Deliverable.id.desc())
    )
    paged = paginate(session, request, query, ACTIVITY_PER_PAGE)
    titles = dict(
        session.execute(
            select(Campaign.id, Campaign.title).where(Campaign.id.in_({d.campaign_id for d in paged.rows}))
        ).all()
    )
    entries = [
        {
            "campaign_title": titles.get(d.campaign_id, ""),
            "campaign_id": d.campaign_id,
            "sent_at": d.sent_at,
            "opened_at": d.opened_at,
            "clicked_at": d.clicked_at,
            "bounced_at": d.bounced_at,
            "unsubscribed_at": d.unsubscribed_at,
            "spam_at": d.spam_at,
        }
        for d in paged.rows
    ]
    return {
        "contact": {
            "last_sent_at": summary[0],
            "last_opened_at": summary[1],
            "last_clicked_at": summary[2],
            "unsubscribed_at": contact.unsubscribed_at,
            "bounced_at": contact.bounced_at,
        },
        "deliverables": paged.envelope(entries),
    }


@router.patch(
    "/unsubscribe",
    response_model=ContactOut,
    summary="Unsubscribe a contact by email",
    responses={400: {"model": ErrorOut}, 404: {"model": ErrorOut}},
)
def unsubscribe(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> Contact:
    body = validate(EmailOnly, raw, status=400)
    contact = session.scalars(
        live_contacts(principal.account.id).where(Contact.email_key == body.email.lower())
    ).first()
    if contact is None:
        raise NotFound("Contact not found.")
    if contact.unsubscribed_at is None:
        contact.unsubscribed_at = utcnow()
        contact.updated_at = contact.unsubscribed_at
        cancel_queued(session, contact.id)
    session.flush()
    return contact
