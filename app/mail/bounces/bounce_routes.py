"""Email providers' bounce and complaint webhooks, `POST /webhooks/bounces/{provider}` for `ses`,
`postmark`, `sendgrid` and `mailgun`: each checks its caller and reads its body in
app/mail/bounces/providers/, then applies the reports as `POST /webhooks/bounces` does
(app/mail/bounces/reports.py). A provider whose setting is empty has no route (404); an unsigned
or wrongly signed body is 401 and changes nothing.
Answer: 200 `{"processed": n, "ignored": m}`, m counting reports about no email Tidings sent and events
that are no bounce, complaint or unsubscribe (deliveries, opens, SNS's unsubscribe confirmation).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from sqlalchemy.orm import Session

from app.app_state import SettingsDep, app_state
from app.config import Settings
from app.identity.dependencies import Unauthenticated
from app.kit.body import read_capped
from app.kit.errors import NotFound
from app.kit.openapi import EXTENSION
from app.kit.time import utcnow
from app.mail.bounces.providers import Events, apply_events, mailgun, postmark, sendgrid, ses
from app.mail.bounces.reports import MAX_BODY_BYTES
from app.mail.sending.queue import BounceRule
from app.mail.sending.tokens import mail_tokens
from app.mail.wire import ErrorOut, WebhookAnswer
from app.request_sessions import SessionDep

router = APIRouter(tags=["Provider webhooks"])


def _turned_on(setting: str) -> None:
    if not setting:
        raise NotFound("Not Found.")


async def ses_events(request: Request) -> Events:
    state = app_state(request)
    settings = state.settings
    _turned_on(settings.ses_topic_arns)
    client = state.sns_client
    try:
        return await ses.read(
            await read_capped(request, MAX_BODY_BYTES),
            topics=settings.ses_topic_arns,
            url_prefix=settings.ses_sns_url_prefix,
            client=client,
            now=utcnow(),
        )
    except ses.BadSignature as exc:
        raise Unauthenticated() from exc


async def postmark_events(request: Request) -> Events:
    secret = app_state(request).settings.postmark_webhook_secret
    _turned_on(secret)
    token = request.query_params.get("token") or request.headers.get(postmark.TOKEN_HEADER)
    if not postmark.authenticated(secret, request.headers.get("authorization", ""), token):
        raise Unauthenticated()
    return postmark.read(await read_capped(request, MAX_BODY_BYTES))


async def sendgrid_events(request: Request) -> Events:
    key = app_state(request).settings.sendgrid_webhook_public_key
    _turned_on(key)
    try:
        return sendgrid.read(
            await read_capped(request, MAX_BODY_BYTES),
            key,
            request.headers.get(sendgrid.SIGNATURE_HEADER),
            request.headers.get(sendgrid.TIMESTAMP_HEADER),
            utcnow(),
        )
    except sendgrid.BadSignature as exc:
        raise Unauthenticated() from exc


async def mailgun_events(request: Request) -> Events:
    key = app_state(request).settings.mailgun_webhook_signing_key
    _turned_on(key)
    try:
        return mailgun.read(await read_capped(request, MAX_BODY_BYTES), key, utcnow())
    except mailgun.BadSignature as exc:
        raise Unauthenticated() from exc


def _apply(settings: Settings, session: Session, events: Events) -> WebhookAnswer:
    rule = BounceRule.from_settings(settings)
    answer = apply_events(session, events, utcnow(), rule, mail_tokens(settings.resolved_secret_key))
    return WebhookAnswer(processed=answer.processed, ignored=answer.ignored)


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _error(
        "Unsigned or wrongly signed (or without the secret), signed more than 5 minutes from now, or a "
        "Mailgun token used before with another body: nothing changed"
    ),
    404: _error("The provider's setting is empty: the route is off"),
    413: _error("The body is larger than 2 MiB"),
    422: _error("The body is not what the provider sends"),
}
SES_RESPONSES: dict[int | str, dict[str, Any]] = {
    **RESPONSES,
    403: _error("The topic is not in TIDINGS_SES_TOPIC_ARNS"),
    502: _error("Amazon SNS could not be reached (SNS retries)"),
}


def _openapi(body: str) -> dict[str, Any]:
    """No bearer token (each provider authenticates its own way), the provider's own JSON body, and
    the mark of a route SendFox does not have."""
    return {
        "security": [],
        **EXTENSION,
        "requestBody": {
            "required": True,
            "description": body,
            "content": {"application/json": {"schema": {}}},
        },
    }


@router.post(
    "/webhooks/bounces/ses",
    responses=SES_RESPONSES,
    openapi_extra=_openapi(
        "An Amazon SNS HTTP(S) message: SubscriptionConfirmation, UnsubscribeConfirmation, or a "
        "Notification whose Message is an SES bounce or complaint notification."
    ),
)
def ses_webhook(
    settings: SettingsDep, session: SessionDep, events: Annotated[Events, Depends(ses_events)]
) -> WebhookAnswer:
    """Amazon SES bounce and complaint notifications through an Amazon SNS HTTPS subscription
    (SubscriptionConfirmation is confirmed; every message's SNS signature is verified)."""
    return _apply(settings, session, events)


@router.post(
    "/webhooks/bounces/postmark",
    responses=RESPONSES,
    openapi_extra=_openapi("One Postmark webhook record (Bounce, SpamComplaint, SubscriptionChange)."),
)
def postmark_webhook(
    settings: SettingsDep, session: SessionDep, events: Annotated[Events, Depends(postmark_events)]
) -> WebhookAnswer:
    """Postmark's bounce, spam complaint and subscription change webhooks (basic auth or `?token=`)."""
    return _apply(settings, session, events)


@router.post(
    "/webhooks/bounces/sendgrid",
    responses=RESPONSES,
    openapi_extra=_openapi("An array of SendGrid Event Webhook events."),
)
def sendgrid_webhook(
    settings: SettingsDep, session: SessionDep, events: Annotated[Events, Depends(sendgrid_events)]
) -> WebhookAnswer:
    """SendGrid's signed Event Webhook (bounce, blocked, dropped, deferred, spamreport, unsubscribe)."""
    return _apply(settings, session, events)


@router.post(
    "/webhooks/bounces/mailgun",
    responses=RESPONSES,
    openapi_extra=_openapi("One Mailgun webhook: its `signature` and `event-data`."),
)
def mailgun_webhook(
    settings: SettingsDep, session: SessionDep, events: Annotated[Events, Depends(mailgun_events)]
) -> WebhookAnswer:
    """Mailgun's webhooks (failed, complained, unsubscribed), signed with the webhook signing key."""
    return _apply(settings, session, events)
