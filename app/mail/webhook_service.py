"""Account webhooks (beyond SendFox): registering endpoints, and reading their delivery log. What is
sent and how is app/mail/events/."""

from __future__ import annotations

import base64
import secrets
from datetime import timedelta

from sqlalchemy import Select, delete, func, select
from sqlalchemy.orm import Session

from app.kit.errors import NotFound, ValidationFailed
from app.kit.ids import new_ulid
from app.kit.pagination import Paging
from app.kit.time import utcnow
from app.mail.common import paginate
from app.mail.events.delivery import message_id
from app.mail.events.emit import emit_test_event
from app.mail.events.types import EventType, mask_of
from app.mail.specs import WebhookCreate, WebhookRotate
from app.mail.wire import Page, WebhookAttemptOut, WebhookCreatedOut, WebhookOut, WebhookSecretOut, row_wire
from app.models import AccountWebhook, WebhookAttempt, WebhookEvent

WEBHOOKS_PER_PAGE = 100
ATTEMPTS_PER_PAGE = 100
# Each endpoint gets its own copy of every event it asks for: a few are plenty.
MAX_WEBHOOKS_PER_ACCOUNT = 20
# After a rotation the previous secret signs beside the new one this long: a day for the receiver's
# owner to deploy the new secret (as Svix and the Standard Webhooks reference servers allow).
ROTATION_GRACE = timedelta(hours=24)


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def webhook_wire(hook: AccountWebhook) -> WebhookOut:
    return WebhookOut(id=hook.id, url=hook.url, events=list(hook.events), created_at=hook.created_at)


def create_webhook(session: Session, account_id: int, body: WebhookCreate) -> WebhookCreatedOut:
    count = session.scalar(select(func.count()).where(AccountWebhook.account_id == account_id)) or 0
    if count >= MAX_WEBHOOKS_PER_ACCOUNT:
        raise ValidationFailed(
            {"url": [f"An account has at most {MAX_WEBHOOKS_PER_ACCOUNT} webhooks; delete one first."]},
            status=422,
        )
    events = list(dict.fromkeys(body.events))
    hook = AccountWebhook(
        id=new_ulid(),
        account_id=account_id,
        url=body.url,
        events=[str(event) for event in events],
        event_mask=mask_of(events),
        secret=body.secret or new_secret(),
        created_at=utcnow(),
    )
    session.add(hook)
    session.flush()
    return WebhookCreatedOut(**dict(webhook_wire(hook)), secret=hook.secret)


def rotate_secret(session: Session, hook: AccountWebhook, body: WebhookRotate) -> WebhookSecretOut:
    """A new secret (the given one, or a new one); the current one signs beside it for ROTATION_GRACE.
    A second rotation within the grace period drops the oldest secret at once: two sign at most."""
    now = utcnow()
    hook.previous_secret = hook.secret
    hook.previous_secret_until = now + ROTATION_GRACE
    hook.secret = body.secret or new_secret()
    session.flush()
    return WebhookSecretOut(
        id=hook.id, secret=hook.secret, previous_secret_expires_at=hook.previous_secret_until
    )


def find_webhook(session: Session, account_id: int, webhook_id: str) -> AccountWebhook:
    hook = session.get(AccountWebhook, webhook_id) if len(webhook_id) <= 26 else None
    if hook is None or hook.account_id != account_id:
        raise NotFound("Webhook not found.")
    return hook


def _webhooks_of(account_id: int) -> Select[AccountWebhook]:
    return select(AccountWebhook).where(AccountWebhook.account_id == account_id).order_by(AccountWebhook.id)


def webhooks_page(session: Session, paging: Paging, account_id: int) -> Page[WebhookOut]:
    paged = paginate(session, paging, _webhooks_of(account_id), WEBHOOKS_PER_PAGE)
    return paged.as_page([webhook_wire(hook) for hook in paged.rows])


def account_webhooks(session: Session, account_id: int) -> list[WebhookOut]:
    """Every endpoint of the account (at most MAX_WEBHOOKS_PER_ACCOUNT), without its secret: the
    console's list, which shows a secret only once, when it is made."""
    return [webhook_wire(hook) for hook in session.scalars(_webhooks_of(account_id))]


def send_test_event(session: Session, hook: AccountWebhook) -> str:
    """Queue an example of the endpoint's first event type for it alone; returns the type."""
    event_type = EventType(hook.events[0])
    emit_test_event(session, hook.account_id, hook.id, event_type, utcnow())
    return str(event_type)


def delete_webhook(session: Session, hook: AccountWebhook) -> None:
    """The endpoint goes with its undelivered events and its log."""
    session.execute(delete(WebhookAttempt).where(WebhookAttempt.webhook_id == hook.id))
    session.execute(delete(WebhookEvent).where(WebhookEvent.webhook_id == hook.id))
    session.execute(delete(AccountWebhook).where(AccountWebhook.id == hook.id))


def attempts_page(session: Session, paging: Paging, hook: AccountWebhook) -> Page[WebhookAttemptOut]:
    """The endpoint's delivery log, newest first."""
    paged = paginate(session, paging, _attempts_of(hook), ATTEMPTS_PER_PAGE)
    return paged.as_page([attempt_wire(attempt) for attempt in paged.rows])


def _attempts_of(hook: AccountWebhook) -> Select[WebhookAttempt]:
    return (
        select(WebhookAttempt).where(WebhookAttempt.webhook_id == hook.id).order_by(WebhookAttempt.id.desc())
    )


def recent_attempts(
    session: Session, hook: AccountWebhook, limit: int = ATTEMPTS_PER_PAGE
) -> list[WebhookAttemptOut]:
    """The endpoint's last `limit` attempts, newest first (the console's delivery log)."""
    return [attempt_wire(attempt) for attempt in session.scalars(_attempts_of(hook).limit(limit))]


def attempt_wire(attempt: WebhookAttempt) -> WebhookAttemptOut:
    return row_wire(WebhookAttemptOut, attempt, event_id=message_id(attempt.event_id))
