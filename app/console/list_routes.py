"""The console's Lists and Fields: each with its count of contacts; create, rename, and delete after a
confirmation page that says what goes (a list in use by a form or an automation is refused, as on
DELETE /lists/{id}). The email API's list and field services and its name rules (ListCreate, and a
field's name as a contact write takes it, ContactFieldIn)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Response

from app.console.pages import CONSOLE, ConsoleUser, PostedForm, messages_of
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.mail import field_service, list_service
from app.mail.input import RawInput, normalize, validate
from app.mail.request_input import RowId
from app.mail.specs import ContactFieldIn, ListCreate

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
LISTS = CONSOLE + "/lists"
FIELDS = CONSOLE + "/fields"


def _name(model: type[ListCreate] | type[ContactFieldIn], form: PostedForm) -> str:
    return validate(model, RawInput(normalize({"name": form.get("name")})), status=422).name


def _saved(
    me: ConsoleUser, change: Callable[[], object], page: Callable[..., Response], done: str
) -> Response:
    """Make the change and go to `done`, or show `page` again with the service's refusal."""
    try:
        change()
    except DomainError as refused:
        return page(me, status=refused.status, errors=messages_of(refused))
    return me.redirect(done)


def _lists_page(me: ConsoleUser, *, status: int = 200, **context: Any) -> Response:
    context.setdefault("errors", [])
    context.setdefault("done", "")
    lists = list_service.account_lists(me.db, me.account_id)
    return me.page("lists/lists.html", section="lists", status=status, lists=lists, **context)


@router.get(LISTS)
def lists_page(me: ConsoleUser, done: str = "") -> Response:
    return _lists_page(me, done=done)


@router.post(LISTS)
def create_list_submit(me: ConsoleUser, form: PostedForm) -> Response:
    def change() -> object:
        return list_service.add_list(me.db, me.account_id, me.user.id, _name(ListCreate, form))

    return _saved(me, change, _lists_page, f"{LISTS}?done=created")


@router.post(LISTS + "/{list_id}/rename")
def rename_list_submit(list_id: RowId, me: ConsoleUser, form: PostedForm) -> Response:
    contact_list = list_service.find_list(me.db, me.principal, list_id)

    def change() -> None:
        list_service.rename_list(me.db, contact_list, _name(ListCreate, form))

    return _saved(me, change, _lists_page, f"{LISTS}?done=renamed")


@router.get(LISTS + "/{list_id}/delete")
def delete_list_page(list_id: RowId, me: ConsoleUser) -> Response:
    contact_list = list_service.find_list(me.db, me.principal, list_id)
    view = list_service.lists_wire(me.db, [contact_list])[0]
    return me.page(
        "lists/confirm.html",
        section="lists",
        what=f"the list {view.name}",
        consequence=f"Its {view.contact_count} contacts stay, on no list of this name.",
        usages=list_service.list_usages(me.db, contact_list.id),
        action=f"{LISTS}/{list_id}/delete",
        back=LISTS,
    )


@router.post(LISTS + "/{list_id}/delete")
def delete_list_submit(list_id: RowId, me: ConsoleUser) -> Response:
    contact_list = list_service.find_list(me.db, me.principal, list_id)
    return _saved(
        me, lambda: list_service.delete_list(me.db, contact_list), _lists_page, f"{LISTS}?done=deleted"
    )


def _fields_page(me: ConsoleUser, *, status: int = 200, **context: Any) -> Response:
    context.setdefault("errors", [])
    context.setdefault("done", "")
    fields = field_service.counted_fields(me.db, me.account_id)
    return me.page("lists/fields.html", section="fields", status=status, fields=fields, **context)


@router.get(FIELDS)
def fields_page(me: ConsoleUser, done: str = "") -> Response:
    return _fields_page(me, done=done)


@router.post(FIELDS)
def create_field_submit(me: ConsoleUser, form: PostedForm) -> Response:
    def change() -> None:
        field_service.add_field(me.db, me.principal, _name(ContactFieldIn, form))

    return _saved(me, change, _fields_page, f"{FIELDS}?done=created")


@router.post(FIELDS + "/{field_id}/rename")
def rename_field_submit(field_id: RowId, me: ConsoleUser, form: PostedForm) -> Response:
    field = field_service.find_field(me.db, me.principal, field_id)

    def change() -> None:
        field_service.rename_field(me.db, field, _name(ContactFieldIn, form))

    return _saved(me, change, _fields_page, f"{FIELDS}?done=renamed")


@router.get(FIELDS + "/{field_id}/delete")
def delete_field_page(field_id: RowId, me: ConsoleUser) -> Response:
    field = field_service.find_field(me.db, me.principal, field_id)
    count = next(
        f.contact_count for f in field_service.counted_fields(me.db, me.account_id) if f.id == field.id
    )
    return me.page(
        "lists/confirm.html",
        section="fields",
        what=f"the field {field.name}",
        consequence=f"The {count} contacts holding a value for it lose that value.",
        usages=[],
        action=f"{FIELDS}/{field_id}/delete",
        back=FIELDS,
    )


@router.post(FIELDS + "/{field_id}/delete")
def delete_field_submit(field_id: RowId, me: ConsoleUser) -> Response:
    field_service.delete_field(me.db, field_service.find_field(me.db, me.principal, field_id))
    return me.redirect(f"{FIELDS}?done=deleted")
