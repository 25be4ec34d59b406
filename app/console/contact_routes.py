"""The console's Contacts: search by email or name, filter by list and by state (subscribed,
unsubscribed, bounced), a page of 100 with a selection for bulk actions (add to a list, remove from a
list, unsubscribe, delete), the filtered set as CSV, and a contact's page (its fields, lists, emails,
and edit, unsubscribe, add to list, delete). The email API's contact and list services throughout."""

from __future__ import annotations

import csv
import io
from contextlib import suppress
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request, Response

from app.app_state import app_state
from app.console.pages import CONSOLE, ConsoleUser, PostedForm, messages_of
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError, NotFound
from app.kit.pagination import parse_page
from app.kit.time import utcnow
from app.mail import contact_listing, contact_service, list_service
from app.mail.input import RawInput, normalize, validate
from app.mail.request_input import RowId
from app.mail.specs import ContactFilter, ContactUpdate
from app.models import Contact

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
CONTACTS = CONSOLE + "/contacts"
STATES = (
    ("", "Any state"),
    ("subscribed", "Subscribed"),
    ("unsubscribed", "Unsubscribed"),
    ("bounced", "Bounced"),
)
BULK_ACTIONS = {
    "add": "Add to the list",
    "remove": "Remove from the list",
    "unsubscribe": "Unsubscribe",
    "delete": "Delete",
}
# The columns of the email API's ContactOut, in its order.
EXPORT_COLUMNS = ["id", "email", "first_name", "last_name", "ip_address", "unsubscribed_at"]
EXPORT_COLUMNS += ["created_at", "updated_at"]


@dataclass(frozen=True)
class Filters:
    """The listing's filters as the page's query string carries them."""

    query: str = ""
    list_id: int | None = None
    state: str = ""

    @classmethod
    def of(cls, q: str, list_id: str, state: str) -> Filters:
        return cls(
            query=q.strip()[:200],
            list_id=int(list_id) if list_id.isdigit() and len(list_id) < 19 else None,
            state=state if state in dict(STATES) else "",
        )

    def listing(self, me: ConsoleUser) -> contact_listing.ContactsListing:
        unsubscribed = {"subscribed": False, "unsubscribed": True}.get(self.state)
        filters = ContactFilter(query=self.query or None, unsubscribed=unsubscribed)
        return contact_listing.contacts_listing(
            me.principal.account, filters, self.list_id, bounced=self.state == "bounced"
        )

    def query_string(self, **more: Any) -> str:
        pairs = {"q": self.query, "list": self.list_id or "", "state": self.state, **more}
        return urlencode({key: value for key, value in pairs.items() if value not in ("", None)})


def _filters(q: str = "", list_id: Annotated[str, Query(alias="list")] = "", state: str = "") -> Filters:
    return Filters.of(q, list_id, state)


@router.get(CONTACTS)
def contacts_page(
    request: Request, me: ConsoleUser, filters: Filters = Depends(_filters), page: str = "1", done: str = ""
) -> Response:
    if filters.list_id is not None:
        list_service.find_list(me.db, me.principal, filters.list_id)
    paging = parse_page(page, contact_listing.CONTACTS_PER_PAGE)
    read = contact_listing.read_page_in_session(
        me.db, filters.listing(me), paging, app_state(request).page_anchors
    )
    rows = read.data if isinstance(read.data, list) else []
    last_page = max(1, -(-read.total // paging.per_page))
    return me.page(
        "contacts/list.html",
        section="contacts",
        contacts=rows,
        total=read.total,
        page=paging.page,
        last_page=last_page,
        filters=filters,
        states=STATES,
        lists=list_service.account_lists(me.db, me.account_id),
        actions=BULK_ACTIONS,
        done=done,
    )


def _csv_cell(value: Any) -> str:
    """A value as a spreadsheet reads it safely: a cell a spreadsheet would run as a formula is quoted."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


@router.get(CONTACTS + "/export.csv")
def export_contacts(me: ConsoleUser, filters: Filters = Depends(_filters)) -> Response:
    if filters.list_id is not None:
        list_service.find_list(me.db, me.principal, filters.list_id)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(EXPORT_COLUMNS)
    for contact in contact_listing.listing_rows(me.db, filters.listing(me)):
        writer.writerow([_csv_cell(contact[column]) for column in EXPORT_COLUMNS])
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="contacts.csv"', "Cache-Control": "no-store"},
    )


def _ids(form: PostedForm) -> list[int]:
    return [int(value) for value in form.all("ids") if value.isdigit() and len(value) < 19]


def _list_id(form: PostedForm) -> int:
    value = form.text("list_id")
    if not value.isdigit() or len(value) >= 19:
        raise DomainError(422, "Choose a list.")
    return int(value)


@router.post(CONTACTS + "/bulk")
def bulk_submit(me: ConsoleUser, form: PostedForm) -> Response:
    back = form.text("back")
    back = back if back.startswith(CONTACTS) and "//" not in back else CONTACTS
    action = form.text("action")
    contacts = contact_service.live_contacts_among(me.db, me.account_id, _ids(form))
    if action not in BULK_ACTIONS or not contacts:
        raise DomainError(422, "Choose contacts and an action.")
    if action == "add":
        contact_service.join_lists(me.db, me.account_id, [c.id for c in contacts], _list_id(form))
    elif action == "remove":
        list_id = _list_id(form)
        list_service.find_list(me.db, me.principal, list_id)
        for contact in contacts:
            with suppress(NotFound):  # not on that list: nothing to remove
                list_service.remove_from_list(me.db, me.principal, list_id, contact.id)
    elif action == "unsubscribe":
        contact_service.unsubscribe_contacts(me.db, [c.id for c in contacts], utcnow())
    else:
        for contact in contacts:
            contact_service.delete_contact(me.db, me.principal, contact)
    separator = "&" if "?" in back else "?"
    return me.redirect(f"{back}{separator}done={action}")


def _contact_page(me: ConsoleUser, contact: Contact, *, status: int = 200, **context: Any) -> Response:
    list_ids, fields = contact_service.contact_lists_and_fields(me.db, contact)
    context.setdefault("errors", [])
    context.setdefault("done", "")
    return me.page(
        "contacts/contact.html",
        section="contacts",
        status=status,
        contact=contact,
        fields=fields,
        list_ids=list_ids,
        lists=list_service.account_lists(me.db, me.account_id),
        summary=contact_service.activity_summary(me.db, contact),
        activity=contact_service.latest_activity(me.db, contact),
        **context,
    )


def _live_contact(me: ConsoleUser, contact_id: int) -> Contact:
    contact = contact_service.find_contact(me.db, me.principal, contact_id)
    if contact.deleted_at is not None:
        raise NotFound("Contact not found.")
    return contact


@router.get(CONTACTS + "/{contact_id}")
def contact_page(contact_id: RowId, me: ConsoleUser, done: str = "") -> Response:
    return _contact_page(me, _live_contact(me, contact_id), done=done)


@router.post(CONTACTS + "/{contact_id}")
def edit_contact_submit(contact_id: RowId, me: ConsoleUser, form: PostedForm) -> Response:
    contact = _live_contact(me, contact_id)
    # The fields shown are sent back as pairs; a new one is named in the last pair. An emptied value
    # removes the field from the contact, as a null does on PATCH /contacts/{id}.
    names, values = form.all("field_name"), form.all("field_value")
    contact_fields = [{"name": n, "value": v} for n, v in zip(names, values, strict=False) if n.strip()]
    body = {
        "first_name": form.get("first_name"),
        "last_name": form.get("last_name"),
        "lists": [int(v) for v in form.all("lists") if v.isdigit() and len(v) < 19],
        "contact_fields": contact_fields,
    }
    try:
        update = validate(ContactUpdate, RawInput(normalize(body)), status=422)
        contact_service.update_contact(me.db, me.principal, contact, update)
    except DomainError as refused:
        return _contact_page(me, contact, status=refused.status, errors=messages_of(refused))
    return me.redirect(f"{CONTACTS}/{contact_id}?done=saved")


@router.post(CONTACTS + "/{contact_id}/lists")
def join_list_submit(contact_id: RowId, me: ConsoleUser, form: PostedForm) -> Response:
    contact = _live_contact(me, contact_id)
    contact_service.join_lists(me.db, me.account_id, [contact.id], _list_id(form))
    return me.redirect(f"{CONTACTS}/{contact_id}?done=added")


@router.post(CONTACTS + "/{contact_id}/unsubscribe")
def unsubscribe_submit(contact_id: RowId, me: ConsoleUser) -> Response:
    contact = _live_contact(me, contact_id)
    contact_service.unsubscribe_contacts(me.db, [contact.id], utcnow())
    return me.redirect(f"{CONTACTS}/{contact_id}?done=unsubscribed")


@router.post(CONTACTS + "/{contact_id}/delete")
def delete_submit(contact_id: RowId, me: ConsoleUser) -> Response:
    contact_service.delete_contact(me.db, me.principal, _live_contact(me, contact_id))
    return me.redirect(f"{CONTACTS}?done=delete")
