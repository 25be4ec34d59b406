"""The console's Webhooks (events out): the account's endpoints, a new one with its event types (the
secret shown once, as the email API's create answers it), an endpoint's delivery log with each attempt,
a test event, and delete. The email API's webhook service and its validation, for paid plans as there."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from app.console.pages import CONSOLE, ConsoleUser, PostedForm, messages_of
from app.identity.dependencies import require_paid_plan
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.mail import webhook_service
from app.mail.events.types import EventType
from app.mail.input import RawInput, normalize, validate
from app.mail.specs import WebhookCreate

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
WEBHOOKS = CONSOLE + "/webhooks"
EVENT_TYPES = [str(event_type) for event_type in EventType]


def _list_page(me: ConsoleUser, *, status: int = 200, **context: Any) -> Response:
    context.setdefault("errors", [])
    context.setdefault("created", None)
    context.setdefault("values", {"url": "", "events": []})
    hooks = webhook_service.account_webhooks(me.db, me.account_id)
    return me.page(
        "webhooks/list.html",
        section="webhooks",
        status=status,
        hooks=hooks,
        event_types=EVENT_TYPES,
        **context,
    )


@router.get(WEBHOOKS)
def webhooks_page(me: ConsoleUser) -> Response:
    require_paid_plan(me.principal)
    return _list_page(me)


@router.post(WEBHOOKS)
def create_webhook_submit(me: ConsoleUser, form: PostedForm) -> Response:
    require_paid_plan(me.principal)
    raw = RawInput(normalize({"url": form.get("url"), "events": form.all("events")}))
    try:
        created = webhook_service.create_webhook(
            me.db, me.account_id, validate(WebhookCreate, raw, status=422)
        )
    except DomainError as refused:
        values = {"url": form.text("url"), "events": form.all("events")}
        return _list_page(me, status=refused.status, errors=messages_of(refused), values=values)
    return _list_page(me, status=201, created=created)


@router.get(WEBHOOKS + "/{webhook_id}")
def webhook_page(webhook_id: str, me: ConsoleUser, sent: str = "") -> Response:
    require_paid_plan(me.principal)
    hook = webhook_service.find_webhook(me.db, me.account_id, webhook_id)
    return me.page(
        "webhooks/webhook.html",
        section="webhooks",
        hook=webhook_service.webhook_wire(hook),
        attempts=webhook_service.recent_attempts(me.db, hook),
        sent=sent,
    )


@router.post(WEBHOOKS + "/{webhook_id}/test")
def test_event_submit(webhook_id: str, me: ConsoleUser) -> Response:
    require_paid_plan(me.principal)
    hook = webhook_service.find_webhook(me.db, me.account_id, webhook_id)
    event_type = webhook_service.send_test_event(me.db, hook)
    return me.redirect(f"{WEBHOOKS}/{webhook_id}?sent={event_type}")


@router.post(WEBHOOKS + "/{webhook_id}/delete")
def delete_webhook_submit(webhook_id: str, me: ConsoleUser) -> Response:
    require_paid_plan(me.principal)
    webhook_service.delete_webhook(me.db, webhook_service.find_webhook(me.db, me.account_id, webhook_id))
    return me.redirect(WEBHOOKS)
