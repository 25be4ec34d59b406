"""The /lists routes and their members."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from sqlalchemy import delete, func, select

from app.db import SessionDep
from app.identity.dependencies import PaidMailUser
from app.kit.errors import Conflict, NotFound
from app.kit.time import utcnow
from app.mail.common import RowId, owned, paginate
from app.mail.contact_service import contact_listing, live_contacts, search
from app.mail.input import MailInput, validate
from app.mail.list_service import LISTS_PER_PAGE, list_usages, list_views
from app.mail.schemas import ContactListOut, ContactOut, ErrorOut, ListInUseOut, MessageOut, Page
from app.mail.specs import ContactFilter, ListCreate
from app.models import Contact, ContactList, ListMembership

router = APIRouter(tags=["Lists"])


@router.get("/lists", response_model=Page[ContactListOut], summary="List contact lists")
def get_lists(
    request: Request, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> dict[str, Any]:
    filters = validate(ContactFilter, raw, status=422)
    query = select(ContactList).where(
        ContactList.account_id == principal.account.id, ContactList.deleted_at.is_(None)
    )
    if filters.query:
        query = query.where(func.lower(ContactList.name).like(f"%{filters.query.lower()}%"))
    paged = paginate(session, request, query.order_by(ContactList.id), LISTS_PER_PAGE)
    return paged.envelope(list_views(session, paged.rows))


@router.post(
    "/lists", response_model=ContactListOut, summary="Create a list", responses={400: {"model": ErrorOut}}
)
def create_list(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> dict[str, Any]:
    body = validate(ListCreate, raw, status=400)
    contact_list = ContactList(account_id=principal.account.id, user_id=principal.user.id, name=body.name)
    session.add(contact_list)
    session.flush()
    return list_views(session, [contact_list])[0]


@router.get(
    "/lists/{id}", response_model=ContactListOut, summary="Get a list", responses={404: {"model": ErrorOut}}
)
def get_list(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    contact_list = owned(session, ContactList, id, principal.account.id, "List not found.")
    return list_views(session, [contact_list])[0]


@router.delete(
    "/lists/{id}",
    response_model=MessageOut,
    summary="Delete a list",
    responses={404: {"model": ErrorOut}, 409: {"model": ListInUseOut}},
)
def delete_list(id: RowId, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    contact_list = owned(session, ContactList, id, principal.account.id, "List not found.")
    usages = list_usages(session, contact_list.id)
    if usages:
        raise Conflict(
            "The list is in use and cannot be deleted.", code="list_in_use", extra={"usages": usages}
        )
    contact_list.deleted_at = utcnow()
    session.flush()
    return MessageOut(message="List deleted.")


@router.get(
    "/lists/{list_id}/contacts",
    response_model=Page[ContactOut],
    summary="List the contacts of a list",
    responses={404: {"model": ErrorOut}},
)
def get_list_contacts(
    list_id: RowId, request: Request, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> Response:
    owned(session, ContactList, list_id, principal.account.id, "List not found.")
    filters = validate(ContactFilter, raw, status=422)
    query = search(live_contacts(principal.account.id), filters.query).where(
        Contact.id.in_(select(ListMembership.contact_id).where(ListMembership.list_id == list_id))
    )
    return contact_listing(session, request, query.order_by(Contact.id))


@router.delete(
    "/lists/{list_id}/contacts/{contact_id}",
    response_model=ContactOut,
    summary="Remove a contact from a list",
    responses={404: {"model": ErrorOut}},
)
def remove_list_contact(
    list_id: RowId, contact_id: RowId, session: SessionDep, principal: PaidMailUser
) -> Contact:
    owned(session, ContactList, list_id, principal.account.id, "List not found.")
    contact = owned(session, Contact, contact_id, principal.account.id, "Contact not found.")
    removed = session.execute(
        delete(ListMembership).where(
            ListMembership.list_id == list_id, ListMembership.contact_id == contact_id
        )
    )
    if not removed.rowcount:  # type: ignore[attr-defined]
        raise NotFound("Contact is not in this list.")
    return contact
