"""The /contacts routes and PATCH /unsubscribe (the rules and SQL are in contact_service.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.app_state import app_state
from app.identity.dependencies import PaidMailUser, rate_headers
from app.kit.openapi import FORM, JSON, request_body
from app.kit.responses import json_response
from app.mail import contact_listing, contact_service
from app.mail.input import validate
from app.mail.request_input import MailInput, PagingDep, RowId
from app.mail.specs import (
    CONTACT_FILTER_PARAMETERS,
    SEARCH_PARAMETERS,
    ContactBatch,
    ContactCreate,
    ContactFilter,
    ContactUpdate,
    EmailOnly,
)
from app.mail.wire import BatchResultOut, ContactActivityOut, ContactOut, ErrorOut, MessageOut, Page
from app.models import Contact
from app.request_sessions import SessionDep

router = APIRouter(tags=["Contacts"])


@router.get(
    "/contacts",
    response_model=Page[ContactOut],
    summary="List contacts",
    openapi_extra=CONTACT_FILTER_PARAMETERS,
)
async def list_contacts(
    request: Request, session: SessionDep, paging: PagingDep, principal: PaidMailUser, raw: MailInput
) -> Response:
    # The hot path (PostgreSQL, no filters) reads with the async pool on the event loop and leaves the
    # session untouched (closed without I/O); the others read through the session in a worker thread.
    # Filtered listings keep the session executor, as before: the JSON PostgreSQL builds is spaced
    # unlike orjson's.
    listing = contact_listing.contacts_listing(principal.account, validate(ContactFilter, raw, status=422))
    state = app_state(request)
    if state.async_pool is not None and listing.shape == contact_listing.UNFILTERED:
        envelope = await contact_listing.contacts_page_on_pool(
            state.async_pool, paging, listing, state.page_anchors
        )
    else:
        envelope = await run_in_threadpool(
            contact_listing.contacts_page, session, paging, listing, state.page_anchors
        )
    return json_response(envelope, headers=rate_headers(request))


@router.post(
    "/contacts",
    openapi_extra=request_body(ContactCreate, media_types=(JSON, FORM)),
    response_model=ContactOut,
    summary="Create or update a contact",
    responses={400: {"model": ErrorOut}, 402: {"model": ErrorOut}},
)
def create_contact(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> Contact:
    body = validate(ContactCreate, raw, status=400)
    return contact_service.upsert_contact(session, principal, contact_service.write_of(body))


@router.post(
    "/contacts/batch",
    openapi_extra=request_body(ContactBatch, media_types=(JSON, FORM)),
    response_model=BatchResultOut,
    summary="Create or update up to 1000 contacts",
    responses={402: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def batch_contacts(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> BatchResultOut:
    body = validate(ContactBatch, raw, status=422)
    writes = [contact_service.write_of(item) for item in body.contacts]
    result = contact_service.upsert_contacts(
        session, principal, writes, validation_status=422, lists_field=lambda index: f"contacts.{index}.lists"
    )
    return BatchResultOut(created=result.created, updated=result.updated)


@router.get(
    "/contacts/unsubscribed",
    response_model=Page[ContactOut],
    summary="List unsubscribed contacts",
    openapi_extra=SEARCH_PARAMETERS,
)
def list_unsubscribed(
    request: Request, session: SessionDep, paging: PagingDep, principal: PaidMailUser, raw: MailInput
) -> Response:
    filters = validate(ContactFilter, raw, status=422)
    listing = contact_listing.unsubscribed_listing(principal.account, filters)
    anchors = app_state(request).page_anchors
    envelope = contact_listing.contacts_page(session, paging, listing, anchors)
    return json_response(envelope, headers=rate_headers(request))


@router.get(
    "/contacts/{id}", response_model=ContactOut, summary="Get a contact", responses={404: {"model": ErrorOut}}
)
def get_contact(id: RowId, session: SessionDep, principal: PaidMailUser) -> Contact:
    return contact_service.find_contact(session, principal, id)


@router.patch(
    "/contacts/{id}",
    openapi_extra=request_body(ContactUpdate, media_types=(JSON, FORM)),
    response_model=ContactOut,
    summary="Update a contact",
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def update_contact(id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput) -> Contact:
    contact = contact_service.find_contact(session, principal, id)
    body = validate(ContactUpdate, raw, status=422)
    return contact_service.update_contact(session, principal, contact, body)


@router.delete(
    "/contacts/{id}",
    response_model=MessageOut,
    summary="Delete a contact",
    responses={404: {"model": ErrorOut}},
)
def delete_contact(id: RowId, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    contact_service.delete_contact(session, principal, contact_service.find_contact(session, principal, id))
    return MessageOut(message="Contact deleted.")


@router.get(
    "/contacts/{id}/activity",
    response_model=ContactActivityOut,
    summary="A contact's sending history",
    responses={404: {"model": ErrorOut}},
)
def contact_activity(
    id: RowId, paging: PagingDep, session: SessionDep, principal: PaidMailUser
) -> ContactActivityOut:
    contact = contact_service.find_contact(session, principal, id)
    return contact_service.contact_activity(session, paging, contact)


@router.patch(
    "/unsubscribe",
    openapi_extra=request_body(EmailOnly, media_types=(JSON, FORM)),
    response_model=ContactOut,
    summary="Unsubscribe a contact by email",
    responses={400: {"model": ErrorOut}, 404: {"model": ErrorOut}},
)
def unsubscribe(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> Contact:
    body = validate(EmailOnly, raw, status=400)
    return contact_service.unsubscribe_by_email(session, principal, body.email)
