"""The /lists routes and their members (the rules and SQL are in list_service.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.app_state import app_state
from app.identity.dependencies import PaidMailUser, rate_headers
from app.kit.openapi import FORM, JSON, request_body
from app.kit.responses import json_response
from app.mail import list_service
from app.mail.input import validate
from app.mail.request_input import MailInput, PagingDep, RowId
from app.mail.specs import SEARCH_PARAMETERS, ContactFilter, ListCreate
from app.mail.wire import ContactListOut, ContactOut, ErrorOut, ListInUseOut, MessageOut, Page
from app.models import Contact
from app.request_sessions import SessionDep

router = APIRouter(tags=["Lists"])


@router.get(
    "/lists",
    response_model=Page[ContactListOut],
    summary="List contact lists",
    openapi_extra=SEARCH_PARAMETERS,
)
def get_lists(
    paging: PagingDep, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> Page[ContactListOut]:
    filters = validate(ContactFilter, raw, status=422)
    return list_service.lists_page(paging, session, principal, filters)


@router.post(
    "/lists",
    response_model=ContactListOut,
    summary="Create a list",
    responses={400: {"model": ErrorOut}},
    openapi_extra=request_body(ListCreate, media_types=(JSON, FORM)),
)
def create_list(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> ContactListOut:
    body = validate(ListCreate, raw, status=400)
    return list_service.add_list(session, principal.account.id, principal.user.id, body.name)


@router.get(
    "/lists/{id}", response_model=ContactListOut, summary="Get a list", responses={404: {"model": ErrorOut}}
)
def get_list(id: RowId, session: SessionDep, principal: PaidMailUser) -> ContactListOut:
    return list_service.lists_wire(session, [list_service.find_list(session, principal, id)])[0]


@router.delete(
    "/lists/{id}",
    response_model=MessageOut,
    summary="Delete a list",
    responses={404: {"model": ErrorOut}, 409: {"model": ListInUseOut}},
)
def delete_list(id: RowId, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    list_service.delete_list(session, list_service.find_list(session, principal, id))
    return MessageOut(message="List deleted.")


@router.get(
    "/lists/{list_id}/contacts",
    response_model=Page[ContactOut],
    summary="List the contacts of a list",
    openapi_extra=SEARCH_PARAMETERS,
    responses={404: {"model": ErrorOut}},
)
def get_list_contacts(
    list_id: RowId,
    request: Request,
    session: SessionDep,
    paging: PagingDep,
    principal: PaidMailUser,
    raw: MailInput,
) -> Response:
    list_service.find_list(session, principal, list_id)
    filters = validate(ContactFilter, raw, status=422)
    anchors = app_state(request).page_anchors
    envelope = list_service.list_contacts(session, paging, anchors, principal, list_id, filters)
    return json_response(envelope, headers=rate_headers(request))


@router.delete(
    "/lists/{list_id}/contacts/{contact_id}",
    response_model=ContactOut,
    summary="Remove a contact from a list",
    responses={404: {"model": ErrorOut}},
)
def remove_list_contact(
    list_id: RowId, contact_id: RowId, session: SessionDep, principal: PaidMailUser
) -> Contact:
    list_service.find_list(session, principal, list_id)
    return list_service.remove_from_list(session, principal, list_id, contact_id)
