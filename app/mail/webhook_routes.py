"""The /webhooks routes (beyond SendFox): an account's endpoints for events out, and their delivery
log (the rules and SQL are in webhook_service.py; what is sent, app/mail/events/)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from app.identity.dependencies import PaidMailUser
from app.kit.openapi import EXTENSION, FORM, JSON, request_body
from app.mail import webhook_service
from app.mail.input import validate
from app.mail.request_input import MailInput, PagingDep
from app.mail.specs import WebhookCreate, WebhookRotate
from app.mail.wire import (
    ErrorOut,
    MessageOut,
    Page,
    WebhookAttemptOut,
    WebhookCreatedOut,
    WebhookOut,
    WebhookSecretOut,
)
from app.request_sessions import SessionDep

router = APIRouter(tags=["Webhooks"])

WebhookId = Annotated[str, Path(min_length=1, max_length=64)]


@router.get(
    "/webhooks",
    response_model=Page[WebhookOut],
    summary="List webhooks (beyond SendFox)",
    openapi_extra=EXTENSION,
)
def get_webhooks(paging: PagingDep, session: SessionDep, principal: PaidMailUser) -> Page[WebhookOut]:
    return webhook_service.webhooks_page(session, paging, principal.account.id)


@router.post(
    "/webhooks",
    response_model=WebhookCreatedOut,
    status_code=201,
    summary="Create a webhook (beyond SendFox)",
    responses={422: {"model": ErrorOut}},
    openapi_extra={**EXTENSION, **request_body(WebhookCreate, media_types=(JSON, FORM))},
)
def create_webhook(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> WebhookCreatedOut:
    body = validate(WebhookCreate, raw, status=422)
    return webhook_service.create_webhook(session, principal.account.id, body)


@router.get(
    "/webhooks/{webhook_id}",
    response_model=WebhookOut,
    summary="Get a webhook (beyond SendFox)",
    responses={404: {"model": ErrorOut}},
    openapi_extra=EXTENSION,
)
def get_webhook(webhook_id: WebhookId, session: SessionDep, principal: PaidMailUser) -> WebhookOut:
    return webhook_service.webhook_wire(
        webhook_service.find_webhook(session, principal.account.id, webhook_id)
    )


@router.delete(
    "/webhooks/{webhook_id}",
    response_model=MessageOut,
    summary="Delete a webhook (beyond SendFox)",
    responses={404: {"model": ErrorOut}},
    openapi_extra=EXTENSION,
)
def delete_webhook(webhook_id: WebhookId, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    webhook_service.delete_webhook(
        session, webhook_service.find_webhook(session, principal.account.id, webhook_id)
    )
    return MessageOut(message="Webhook deleted.")


@router.post(
    "/webhooks/{webhook_id}/rotate-secret",
    response_model=WebhookSecretOut,
    summary="Rotate a webhook's signing secret (beyond SendFox)",
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
    openapi_extra={**EXTENSION, **request_body(WebhookRotate, media_types=(JSON, FORM), required=False)},
)
def rotate_webhook_secret(
    webhook_id: WebhookId, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> WebhookSecretOut:
    """A new signing secret, shown this once; the previous one keeps signing beside it for 24 hours."""
    hook = webhook_service.find_webhook(session, principal.account.id, webhook_id)
    return webhook_service.rotate_secret(session, hook, validate(WebhookRotate, raw, status=422))


@router.get(
    "/webhooks/{webhook_id}/deliveries",
    response_model=Page[WebhookAttemptOut],
    summary="A webhook's delivery log (beyond SendFox)",
    responses={404: {"model": ErrorOut}},
    openapi_extra=EXTENSION,
)
def get_webhook_deliveries(
    webhook_id: WebhookId, paging: PagingDep, session: SessionDep, principal: PaidMailUser
) -> Page[WebhookAttemptOut]:
    hook = webhook_service.find_webhook(session, principal.account.id, webhook_id)
    return webhook_service.attempts_page(session, paging, hook)
