"""Hosted sign-up forms: the public pages `GET|POST /f/{id}` and the double opt-in `GET /f/confirm/{token}`.

These are pages for people, not part of the email API: no credentials, HTML answers, and they are left
out of the API's OpenAPI document. This module decides (docs/email-api.md tells the reader):

- `GET /f/{id}` shows the form: email (required), first and last name (optional). An id that is not an
  integer, an unknown or deleted form, or a form none of whose lists is live any more is a 404 page.
- `POST /f/{id}` takes a form body (`application/x-www-form-urlencoded`) or a JSON object, at most
  32 KiB, with `email`, `first_name` and `last_name` (each at most 191 characters). The answer is an
  HTML page whatever the body's type; its status tells the outcome: 200 "check your inbox"; 422 the
  form again with the messages (as 413 for a body too large, 415 for another content type); 429 with
  `Retry-After` past `TIDINGS_FORM_RATE_LIMIT` submissions from one client address (10 a minute) or past
  `TIDINGS_FORM_EMAIL_RATE_LIMIT` confirmation emails to one address (5 an hour), so the form cannot be
  used to flood anybody's inbox; 503 with `Retry-After` when the email could not be sent.
- A submission that fills the hidden honeypot field `website` gets the 200 page and no email.
- The confirmation email is sent inline, before the answer, within 10 seconds, not after it as a
  background task: nothing is stored before the confirmation, so an email lost after a 200 would be a
  request lost without a trace. Inline, the visitor sees the failure (503, the form filled in again)
  and can resubmit, and a slow relay slows only the visitor who caused the send, already rate limited.
  Failures are logged. The email's From is `noreply@` the base URL's host; see sending/confirmation.py.
- `GET /f/confirm/{token}` takes the signed token from the email (form, email, names; good for 7 days).
  Forged, garbled or expired: 404 page. The form deleted since: 404 page. Otherwise the contact is
  created or updated by the same upsert as `POST /contacts` (given names replace stored ones, a
  soft-deleted contact comes back without its old lists, the account's contact limit holds: a 402 page
  saying the list takes no new subscribers) and added to the form's live lists; its `ip_address` is
  the confirming client's. The answer is a 200 "you are subscribed" page.
- An unsubscribed contact that confirms is subscribed again (`unsubscribed_at` is cleared), which the
  upsert never does by itself: confirming a sign-up is an explicit request to receive the emails.
  Except when the unsubscribe, or the deletion of the contact, came after the link was sent: an old
  link still in an inbox must not undo a later unsubscribe, so it changes nothing and answers a 410
  page pointing to the form.
- Confirming is idempotent: when the contact is already live, subscribed, in every live list of the
  form and holds the given names, nothing is written, and the same 200 page answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.config import Settings
from app.identity.principal import principal_of
from app.kit.errors import DomainError, ValidationFailed
from app.kit.ratelimit import RateDecision, RateLimiter
from app.kit.time import utcnow
from app.mail.common import valid_id
from app.mail.contact_service import ContactWrite, upsert_contacts
from app.mail.hosted_forms.confirmation import confirmation_email
from app.mail.input import RawInput, TooDeep, normalize, validate
from app.mail.sending.dkim import DkimSigner
from app.mail.sending.tokens import MailTokens, Signup
from app.mail.sending.transport import PermanentFailure, TemporaryFailure, make_transport
from app.mail.specs import SignupIn
from app.models import Account, Contact, ContactList, Form, FormList, ListMembership, User

log = logging.getLogger("tidings.forms")

MAX_BODY_BYTES = 32 * 1024
MAX_FIELDS = 50
SEND_TIMEOUT_SECONDS = 10
HONEYPOT = "website"
FIELDS = ("email", "first_name", "last_name")
FORM_ID = re.compile(r"[0-9]{1,10}")
# itsdangerous writes URL-safe base64 and dots; anything else (or anything longer) was never ours.
TOKEN = re.compile(r"[A-Za-z0-9_.\-]{1,2048}")


@dataclass(frozen=True)
class FormLimits:
    """Rate limits of POST /f/{id}: per client address, and confirmation emails per recipient."""

    per_client: RateLimiter
    per_email: RateLimiter

    @classmethod
    def from_settings(cls, settings: Settings) -> FormLimits:
        return cls(
            RateLimiter(settings.form_rate_limit, settings.redis_url),
            RateLimiter(settings.form_email_rate_limit, settings.redis_url),
        )


# ---------------------------------------------------------------------------------------------- service


@dataclass(frozen=True)
class PublicForm:
    id: int
    account_id: int
    title: str
    list_ids: list[int]
    owner_email: str | None
    owner_name: str | None


def parse_form_id(raw: str) -> int | None:
    if not FORM_ID.fullmatch(raw):
        return None
    form_id = int(raw)
    return form_id if valid_id(form_id) else None


def open_form(session: Session, form_id: int) -> PublicForm | None:
    """A live form that still subscribes to at least one live list, with its owner for Reply-To."""
    form = session.get(Form, form_id)
    if form is None or form.deleted_at is not None:
        return None
    list_ids = list(
        session.scalars(
            select(FormList.list_id)
            .join(ContactList, ContactList.id == FormList.list_id)
            .where(
                FormList.form_id == form.id,
                ContactList.account_id == form.account_id,
                ContactList.deleted_at.is_(None),
            )
            .order_by(FormList.list_id)
        )
    )
    if not list_ids:
        return None
    owner = session.execute(
        select(User.email, User.name).where(User.account_id == form.account_id).order_by(User.id).limit(1)
    ).first()
    return PublicForm(
        id=form.id,
        account_id=form.account_id,
        title=form.title,
        list_ids=list_ids,
        owner_email=owner.email if owner else None,
        owner_name=owner.name if owner else None,
    )


def check_submission(raw: dict[str, Any]) -> SignupIn:
    """The validated fields, or ValidationFailed (422) with a message per field."""
    try:
        data = normalize({name: raw.get(name) for name in FIELDS})
    except TooDeep as exc:
        raise ValidationFailed({"body": [str(exc)]}) from exc
    return validate(SignupIn, RawInput(data), status=422)


def ip_or_none(value: str) -> str | None:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def too_many(decision: RateDecision, message: str) -> DomainError:
    return DomainError(429, message, headers={"Retry-After": str(decision.retry_after)})


async def request_signup(
    settings: Settings,
    limits: FormLimits,
    form: PublicForm,
    raw: dict[str, Any],
    client: str,
    dkim: DkimSigner | None = None,
) -> SignupIn:
    """Check a submission and email its confirmation link. Raises DomainError (422, 429, 503)."""
    decision = await limits.per_client.hit("form", client)
    if not decision.allowed:
        raise too_many(decision, "Too many sign-ups from your network. Please try again later.")
    signup = check_submission(raw)
    if raw.get(HONEYPOT):
        # A person never sees the field; answer as usual so a bot learns nothing.
        log.info("form %s: honeypot filled from %s, no email sent", form.id, client)
        return signup
    digest = hashlib.sha256(signup.email.lower().encode("utf-8")).hexdigest()[:32]
    decision = await limits.per_email.hit("form-email", digest)
    if not decision.allowed:
        raise too_many(
            decision,
            "We already sent several confirmation emails to this address. "
            "Please check your inbox (and spam folder), or try again later.",
        )
    await send_confirmation(settings, form, signup, dkim)
    return signup


async def send_confirmation(
    settings: Settings, form: PublicForm, signup: SignupIn, dkim: DkimSigner | None = None
) -> None:
    """Email the confirmation link, signed with the sender domain's DKIM keys when it has some."""
    base_url = settings.base_url.rstrip("/")
    token = MailTokens(settings.resolved_secret_key).confirm_token(
        Signup(form.id, signup.email, signup.first_name, signup.last_name)
    )
    email = confirmation_email(
        base_url=base_url,
        form_title=form.title,
        confirm_url=f"{base_url}/f/confirm/{token}",
        email=signup.email,
        first_name=signup.first_name,
        last_name=signup.last_name,
        owner_email=form.owner_email,
        owner_name=form.owner_name,
    )
    unavailable = DomainError(
        503,
        "We could not send the confirmation email just now. Please try again in a few minutes.",
        headers={"Retry-After": "60"},
    )
    domain = signup.email.rpartition("@")[2]
    # One connection per sign-up: forms send a few emails a minute, not worth a pool kept across requests.
    transport = None
    try:
        transport = make_transport(settings.smtp_url, settings.outbox_path, 1, settings.ehlo_name)
        async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
            message = email.message if dkim is None else dkim.sign(email.message, email.envelope_from)
            sending_domain = email.envelope_from.rpartition("@")[2].lower()
            await transport.send(email.envelope_from, email.envelope_to, message, sending_domain)
    except PermanentFailure as exc:
        if exc.bounce:
            log.info("form %s: the relay refused a confirmation to @%s: %s", form.id, domain, exc)
            raise DomainError(
                422,
                "Email to this address is refused. Please check it.",
                errors={"email": ["Email to this address is refused. Please check it."]},
            ) from exc
        log.error("form %s: confirmation to @%s refused by the relay: %s", form.id, domain, exc)
        raise unavailable from exc
    except (TemporaryFailure, TimeoutError) as exc:
        log.warning("form %s: confirmation to @%s not sent: %r", form.id, domain, exc)
        raise unavailable from exc
    except Exception as exc:
        # A broken TIDINGS_SMTP_URL or the like: the visitor gets the 503 page (never a 500) and the
        # operator a traceback.
        log.exception("form %s: confirmation to @%s not sent", form.id, domain)
        raise unavailable from exc
    finally:
        if transport is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await transport.close()


class Confirmed(Enum):
    SUBSCRIBED = "subscribed"
    ALREADY = "already"
    STALE = "stale"
    GONE = "gone"


@dataclass(frozen=True)
class Confirmation:
    outcome: Confirmed
    form: PublicForm | None


def _later(moment: datetime | None, issued_at: datetime) -> bool:
    # The token's time is in whole seconds, so within one second the order is unknown; it is taken as
    # "before", which keeps a sign-up made right after an unsubscribe working.
    return moment is not None and int(moment.timestamp()) > int(issued_at.timestamp())


def _already_done(session: Session, contact: Contact, form: PublicForm, signup: Signup) -> bool:
    if contact.deleted_at is not None or contact.unsubscribed_at is not None:
        return False
    if signup.first_name is not None and contact.first_name != signup.first_name:
        return False
    if signup.last_name is not None and contact.last_name != signup.last_name:
        return False
    joined = set(
        session.scalars(
            select(ListMembership.list_id).where(
                ListMembership.contact_id == contact.id, ListMembership.list_id.in_(form.list_ids)
            )
        )
    )
    return joined == set(form.list_ids)


def confirm_signup(
    session: Session, signup: Signup, issued_at: datetime, ip_address: str | None
) -> Confirmation:
    """Subscribe a confirmed sign-up (see the module's docstring). Raises ContactLimitExceeded (402)."""
    form = open_form(session, signup.form_id)
    if form is None:
        return Confirmation(Confirmed.GONE, None)
    key = signup.email.lower()
    contact = session.scalars(
        select(Contact).where(Contact.account_id == form.account_id, Contact.email_key == key)
    ).first()
    if contact is not None:
        if _later(contact.unsubscribed_at, issued_at) or _later(contact.deleted_at, issued_at):
            return Confirmation(Confirmed.STALE, form)
        if _already_done(session, contact, form, signup):
            return Confirmation(Confirmed.ALREADY, form)
    account = session.get_one(Account, form.account_id)
    owner = session.scalars(
        select(User).where(User.account_id == account.id).order_by(User.id).limit(1)
    ).first()
    if owner is None:
        return Confirmation(Confirmed.GONE, None)
    write = ContactWrite(
        email=signup.email,
        first_name=signup.first_name,
        last_name=signup.last_name,
        ip_address=ip_address,
        lists=list(form.list_ids),
    )
    # The shared upsert, so every rule of a contact write (the limit, restoring, the hooks) applies.
    result = upsert_contacts(session, principal_of(owner, account), [write], validation_status=422)
    now = utcnow()
    session.execute(
        update(Contact)
        .where(Contact.id == result.ids_by_key[key], Contact.unsubscribed_at.is_not(None))
        .values(unsubscribed_at=None, updated_at=now)
    )
    session.flush()
    return Confirmation(Confirmed.SUBSCRIBED, form)
