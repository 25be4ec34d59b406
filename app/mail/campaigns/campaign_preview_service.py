"""A campaign's email as one contact would get it (GET /campaigns/{id}/preview), and test sends of it
(POST /campaigns/{id}/test).

Both are made by the send path's own `compile_campaign` and `render` (app/mail/sending/render.py), so
what a preview shows is what the worker sends: merge tags and their fallbacks, the signed click links,
the open pixel, the unsubscribe link and footer, the plain-text part, the headers (List-Id and
Feedback-ID included). One thing differs on
purpose: the signed tokens name no email (deliverable id 2**31 - 1, the last id the queue's integer
column can hold, which it reaches only after two billion emails), so a preview's or a test
email's links go where they should while counting nothing, and its unsubscribe link unsubscribes nobody.

Test sends go to at most MAX_TEST_ADDRESSES addresses, with `[Test] ` before the subject; a contact of
the account with that address fills the merge tags, anyone else gets the fallbacks. They are counted in
no statistic, checked against no suppression, and limited per account (TEST_SENDS_PER_HOUR) so that
the route cannot be used to send mail in bulk outside a campaign. They are DKIM-signed as the send
worker signs: a receiver judges a test email as it will judge the campaign's.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import logging
from dataclasses import dataclass, replace
from email.message import EmailMessage
from functools import cache
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import Settings
from app.kit.errors import DomainError, NotFound, ValidationFailed
from app.kit.ratelimit import RateLimiter
from app.mail.sending.dkim import DkimSigner
from app.mail.sending.queue import custom_fields_of, first_lists
from app.mail.sending.render import Recipient, Rendered, campaign_headers, compile_stored, render
from app.mail.sending.tokens import MAX_ROW_ID, MailTokens
from app.mail.sending.transport import PermanentFailure, TemporaryFailure, make_transport
from app.mail.wire import CampaignPreviewOut
from app.models import Account, Campaign, Contact

log = logging.getLogger("tidings.mail.preview")

# No deliverable has this id: the tokens of a preview or a test email record nothing (a token's id must
# be a positive row id to be read at all).
UNTRACKED = MAX_ROW_ID
MAX_TEST_ADDRESSES = 10
TEST_SENDS_PER_HOUR = "30/hour"
TEST_SUBJECT_PREFIX = "[Test] "
SEND_TIMEOUT_SECONDS = 20


@dataclass(frozen=True, slots=True)
class MailContext:
    """What rendering needs from the service's settings (the worker's own values)."""

    tokens: MailTokens
    base_url: str
    bounce_domain: str = ""


@cache
def _mail_context(secret_key: str, base_url: str, bounce_domain: str) -> MailContext:
    return MailContext(MailTokens(secret_key), base_url.rstrip("/"), bounce_domain)


def mail_context_of(settings: Settings) -> MailContext:
    return _mail_context(settings.resolved_secret_key, settings.base_url, settings.bounce_domain)


def recipient_of(session: Session, account_id: int, contact_id: int | None, address: str | None) -> Recipient:
    """The contact the preview is for, by id or by address (404 when the account has no such live
    contact); with neither, a reader with no names (the merge tags' fallbacks show)."""
    if contact_id is None and not address:
        return Recipient(UNTRACKED, "reader@example.com", None, None, {})
    query = select(Contact).where(Contact.account_id == account_id, Contact.deleted_at.is_(None))
    if contact_id is not None:
        query = query.where(Contact.id == contact_id)
    else:
        query = query.where(Contact.email_key == (address or "").lower())
    contact = session.scalars(query).first()
    if contact is None:
        raise NotFound("Contact not found.")
    return _recipient(session, contact)


def _recipient(session: Session, contact: Contact) -> Recipient:
    fields = custom_fields_of(session, [contact.id]).get(contact.id, {})
    return Recipient(UNTRACKED, contact.email, contact.first_name, contact.last_name, fields)


def rendered_email(
    session: Session, campaign: Campaign, recipient: Recipient, context: MailContext, subject_prefix: str = ""
) -> Rendered:
    """The email the send worker would make of this campaign for this recipient."""
    account_tracks_opens = session.scalar(
        select(Account.track_opens).where(Account.id == campaign.account_id)
    )
    list_id = first_lists(session, [campaign.id]).get(campaign.id)
    compiled = compile_stored(
        campaign,
        account_tracks_opens=bool(account_tracks_opens),
        headers=campaign_headers(campaign.id, campaign.account_id, list_id, context.base_url),
        subject_prefix=subject_prefix,
    )
    return render(compiled, recipient, context.tokens, context.base_url, context.bounce_domain)


def preview(rendered: Rendered) -> CampaignPreviewOut:
    """The parts of a rendered email, decoded: subject, from, to, html and text."""
    message = email.message_from_bytes(bytes(rendered.message), policy=email.policy.default)
    if not isinstance(message, EmailMessage):
        raise TypeError("the renderer made no EmailMessage")
    return CampaignPreviewOut(
        subject=str(message["Subject"]),
        from_=str(message["From"]),
        to=str(message["To"]),
        html=_part(message, "html"),
        text=_part(message, "plain"),
    )


def _part(message: EmailMessage, subtype: str) -> str:
    body = message.get_body(preferencelist=(subtype,))
    return str(body.get_content()) if body is not None else ""


def test_emails(
    session: Session, campaign: Campaign, addresses: list[str], context: MailContext, signer: DkimSigner
) -> list[Rendered]:
    """The test emails to send: each address once, merge tags from the account's contact with it, and
    DKIM-signed as the send worker signs (with its From domain's keys, when it has any)."""
    unique = list(dict.fromkeys(address.strip() for address in addresses))
    if not unique or len(unique) > MAX_TEST_ADDRESSES:
        raise ValidationFailed({"emails": [f"Give 1 to {MAX_TEST_ADDRESSES} email addresses."]})
    contacts = {
        contact.email_key: contact
        for contact in session.scalars(
            select(Contact).where(
                Contact.account_id == campaign.account_id,
                Contact.deleted_at.is_(None),
                Contact.email_key.in_([address.lower() for address in unique]),
            )
        )
    }
    emails = []
    for address in unique:
        contact = contacts.get(address.lower())
        recipient = _recipient(session, contact) if contact else Recipient(UNTRACKED, address, None, None, {})
        emails.append(rendered_email(session, campaign, recipient, context, TEST_SUBJECT_PREFIX))
    signer.refresh(session)  # keys made or deleted since the last test send
    return [
        replace(rendered, message=signer.sign(rendered.message, campaign.from_email)) for rendered in emails
    ]


async def send_test_emails(
    limiter: RateLimiter, account_id: int, settings: Settings, emails: list[Rendered]
) -> list[str]:
    """The account's test emails, within its hourly allowance (429 past it): sent one after the other
    on one connection; the addresses the relay accepted. 503 when it accepted none."""
    decision = await limiter.hit("campaign-test", str(account_id))
    if not decision.allowed:
        raise DomainError(429, "Too many test emails: try again later.", headers=decision.headers())
    return await _send(settings.smtp_url, settings.outbox_path, emails)


async def _send(smtp_url: str, outbox: Path, emails: list[Rendered]) -> list[str]:
    accepted: list[str] = []
    transport = make_transport(smtp_url, outbox, 1)
    try:
        async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
            for rendered in emails:
                try:
                    await transport.send(
                        rendered.envelope_from,
                        rendered.envelope_to,
                        rendered.message,
                        rendered.sending_domain,
                    )
                except PermanentFailure as exc:
                    log.info(
                        "a test email to @%s was refused: %s", rendered.envelope_to.rpartition("@")[2], exc
                    )
                    continue
                accepted.append(rendered.envelope_to)
    except (TemporaryFailure, TimeoutError) as exc:
        log.warning("test emails not sent: %r", exc)
    finally:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await transport.close()
    if not accepted:
        raise DomainError(503, "The test email could not be sent just now.", headers={"Retry-After": "60"})
    return accepted
