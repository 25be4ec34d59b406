"""The console's Automations (drip sequences): each with its trigger, emails and state; a new one; an
automation's page with its emails in order and their delays, on/off, a new email, and who is in it;
an email's edit page. The email API's automation service and its models (AutomationCreate,
AutomationUpdate, AutomationEmailCreate, AutomationEmailUpdate)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from app.console.pages import CONSOLE, ConsoleUser, Form, PostedForm, messages_of
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.mail import list_service
from app.mail.automations import automation_service
from app.mail.input import RawInput, normalize, validate
from app.mail.request_input import RowId
from app.mail.specs import AutomationCreate, AutomationEmailCreate, AutomationEmailUpdate, AutomationUpdate
from app.models import Automation

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
AUTOMATIONS = CONSOLE + "/automations"
TRIGGERS = {
    "apply_list": "A contact joins a list",
    "open_campaign": "A contact opens a campaign",
    "click_campaign": "A contact clicks in a campaign",
}
EMAIL_FIELDS = ("subject", "from_name", "from_email", "delay_hours", "html")


def _raw(form: Form, names: tuple[str, ...]) -> RawInput:
    return RawInput(normalize({name: form.get(name) for name in names}))


def _list_page(me: ConsoleUser, *, status: int = 200, **context: Any) -> Response:
    context.setdefault("errors", [])
    return me.page(
        "automations/list.html",
        section="automations",
        status=status,
        automations=automation_service.account_automations(me.db, me.account_id),
        lists=list_service.account_lists(me.db, me.account_id),
        triggers=TRIGGERS,
        **context,
    )


@router.get(AUTOMATIONS)
def automations_page(me: ConsoleUser) -> Response:
    return _list_page(me)


@router.post(AUTOMATIONS)
def create_automation_submit(me: ConsoleUser, form: PostedForm) -> Response:
    names = ("title", "trigger_type", "trigger_list_id", "trigger_campaign_id")
    try:
        body = validate(AutomationCreate, _raw(form, names), status=422)
        made = automation_service.create_automation(me.db, me.principal, body)
    except DomainError as refused:
        return _list_page(me, status=refused.status, errors=messages_of(refused))
    return me.redirect(f"{AUTOMATIONS}/{made.id}")


def _automation_page(
    me: ConsoleUser, automation: Automation, *, status: int = 200, **context: Any
) -> Response:
    context.setdefault("errors", [])
    total, members = automation_service.automation_members(me.db, automation)
    return me.page(
        "automations/automation.html",
        section="automations",
        status=status,
        automation=automation_service.automations_wire(me.db, [automation], with_stats=True)[0],
        triggers=TRIGGERS,
        lists={item.id: item.name for item in list_service.account_lists(me.db, me.account_id)},
        members_total=total,
        members=members,
        **context,
    )


@router.get(AUTOMATIONS + "/{automation_id}")
def automation_page(automation_id: RowId, me: ConsoleUser) -> Response:
    return _automation_page(me, automation_service.find_automation(me.db, me.principal, automation_id))


@router.post(AUTOMATIONS + "/{automation_id}/active")
def active_submit(automation_id: RowId, me: ConsoleUser, form: PostedForm) -> Response:
    automation = automation_service.find_automation(me.db, me.principal, automation_id)
    body = validate(AutomationUpdate, _raw(form, ("active",)), status=422)
    automation_service.update_automation(me.db, me.principal, automation, body)
    return me.redirect(f"{AUTOMATIONS}/{automation_id}")


@router.post(AUTOMATIONS + "/{automation_id}/emails")
def add_email_submit(automation_id: RowId, me: ConsoleUser, form: PostedForm) -> Response:
    automation = automation_service.find_automation(me.db, me.principal, automation_id)
    try:
        body = validate(AutomationEmailCreate, _raw(form, EMAIL_FIELDS), status=422)
        automation_service.add_automation_email(me.db, me.principal, automation, body)
    except DomainError as refused:
        values = {name: form.get(name) for name in EMAIL_FIELDS}
        return _automation_page(
            me, automation, status=refused.status, errors=messages_of(refused), values=values
        )
    return me.redirect(f"{AUTOMATIONS}/{automation_id}")


def _email_page(me: ConsoleUser, item_id: int, *, status: int = 200, **context: Any) -> Response:
    item, automation = automation_service.owned_item(me.db, item_id, me.principal)
    context.setdefault("errors", [])
    return me.page(
        "automations/email.html",
        section="automations",
        status=status,
        automation=automation,
        item=automation_service.items_wire(me.db, [item], with_stats=False)[0],
        **context,
    )


@router.get(AUTOMATIONS + "/emails/{item_id}")
def email_page(item_id: RowId, me: ConsoleUser) -> Response:
    return _email_page(me, item_id)


@router.post(AUTOMATIONS + "/emails/{item_id}")
def edit_email_submit(item_id: RowId, me: ConsoleUser, form: PostedForm) -> Response:
    item, automation = automation_service.owned_item(me.db, item_id, me.principal)
    try:
        body = validate(AutomationEmailUpdate, _raw(form, (*EMAIL_FIELDS, "send_order")), status=422)
        automation_service.update_automation_email(me.db, automation, item, body)
    except DomainError as refused:
        return _email_page(me, item_id, status=refused.status, errors=messages_of(refused))
    return me.redirect(f"{AUTOMATIONS}/{automation.id}")
