"""Contact lists: /lists routes, their members, the in-use check before deletion, and the CLI's making and
listing of an account's lists."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.db import SessionDep
from app.identity.dependencies import PaidMailUser
from app.kit.errors import Conflict, DomainError, NotFound
from app.kit.time import utcnow
from app.mail.common import RowId, owned, paginate
from app.mail.contacts import ContactFilter, contact_listing, live_contacts, search
from app.mail.input import MailInput, validate
from app.mail.schemas import ContactListOut, ContactOut, ErrorOut, ListInUseOut, MessageOut, Page
from app.mail.stats import list_averages
from app.models import Automation, AutomationTrigger, Contact, ContactList, Form, FormList, ListMembership

LISTS_PER_PAGE = 100

router = APIRouter(tags=["Lists"])


class ListCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: Annotated[str, Field(max_length=191)]


def list_views(session: Session, lists: list[ContactList]) -> list[dict[str, Any]]:
    """Lists with their live member counts and open and click averages, in two queries for any number."""
    ids = [item.id for item in lists]
    counts = (
        dict(
            session.execute(
                select(ListMembership.list_id, func.count())
                .join(Contact, Contact.id == ListMembership.contact_id)
                .where(ListMembership.list_id.in_(ids), Contact.deleted_at.is_(None))
                .group_by(ListMembership.list_id)
            ).all()
        )
        if ids
        else {}
    )
    averages = list_averages(session, ids)
    return [
        {
            "id": item.id,
            "name": item.name,
            "user_id": item.user_id,
            "contact_count": counts.get(item.id, 0),
            "average_email_open_percent": averages.get(item.id, (0.0, 0.0))[0],
            "average_email_click_percent": averages.get(item.id, (0.0, 0.0))[1],
            "created_at": item.created_at,
            "updated_at": item.updated_at,
        }
        for item in lists
    ]


def make_list(session: Session, account_id: int, user_id: int, name: str) -> dict[str, Any]:
    """A new list of the account (the CLI; the API's route checks the name with its own schema)."""
    name = name.strip()
    if not name or len(name) > 191:
        raise DomainError(400, "A list name is 1 to 191 characters.")
    contact_list = ContactList(account_id=account_id, user_id=user_id, name=name)
    session.add(contact_list)
    session.flush()
    return list_views(session, [contact_list])[0]


def account_lists(session: Session, account_id: int) -> list[dict[str, Any]]:
    """The account's live lists with their counts, oldest first."""
    lists = session.scalars(
        select(ContactList)
        .where(ContactList.account_id == account_id, ContactList.deleted_at.is_(None))
        .order_by(ContactList.id)
    )
    return list_views(session, list(lists))


def list_usages(session: Session, list_id: int) -> list[dict[str, Any]]:
    forms = session.execute(
        select(Form.id, Form.title)
        .join(FormList, FormList.form_id == Form.id)
        .where(FormList.list_id == list_id, Form.deleted_at.is_(None))
    ).all()
    automations = session.execute(
        select(Automation.id, Automation.title)
        .join(AutomationTrigger, AutomationTrigger.automation_id == Automation.id)
        .where(AutomationTrigger.list_id == list_id, Automation.deleted_at.is_(None))
    ).all()
    return [
        *({"type": "form", "id": form_id, "title": title} for form_id, title in forms),
        *(
            {"type": "automation", "id": automation_id, "title": title}
            for automation_id, title in automations
        ),
    ]


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
