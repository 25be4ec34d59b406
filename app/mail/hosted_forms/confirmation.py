"""The double opt-in email of a hosted sign-up form: who it is from, its subject, text and html parts.

From is `"<form title>" <noreply@<base URL host>>`, not the form owner's own address: the relay sends
for the service's domain, and a From in someone else's domain (gmail.com, say) fails their DMARC and
lands in spam or nowhere. Replies still reach a person: Reply-To is the owner's user email. When the
base URL's host is an IP address (a local set-up) the address is `noreply@localhost`.
"""

from __future__ import annotations

import html
import ipaddress
import secrets
from dataclasses import dataclass
from email.utils import formatdate
from urllib.parse import urlsplit

# Private helpers of the campaign renderer, imported rather than copied so both kinds of email write
# their headers the same way (render.py is being tuned by others and is deliberately left untouched).
from app.mail.sending.render import _address_header, _ascii_domain, _header_text, multipart_alternative
from app.mail.sending.tokens import CONFIRM_MAX_AGE_SECONDS


@dataclass(frozen=True, slots=True)
class ConfirmationEmail:
    envelope_from: str
    envelope_to: str
    message: bytes


def sender_domain(base_url: str) -> str:
    host = urlsplit(base_url).hostname or "localhost"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return _ascii_domain(f"x@{host}").partition("@")[2]
    return "localhost"


def confirmation_subject(form_title: str) -> str:
    return f"Confirm your subscription to {form_title}"


def confirmation_email(
    *,
    base_url: str,
    form_title: str,
    confirm_url: str,
    email: str,
    first_name: str | None,
    last_name: str | None,
    owner_email: str | None,
    owner_name: str | None,
) -> ConfirmationEmail:
    domain = sender_domain(base_url)
    sender = f"noreply@{domain}"
    recipient = _ascii_domain(email)
    name = " ".join(part for part in (first_name, last_name) if part)
    headers = [
        f"From: {_address_header(form_title, sender)}",
        f"To: {_address_header(name, recipient)}",
        f"Subject: {_header_text(confirmation_subject(form_title))}",
        f"Date: {formatdate(usegmt=True)}",
        f"Message-ID: <confirm.{secrets.token_hex(8)}@{domain}>",
        # RFC 3834: sent because of a request, so auto-responders and vacation replies stay quiet.
        "Auto-Submitted: auto-generated",
        "MIME-Version: 1.0",
    ]
    if owner_email:
        headers.insert(1, f"Reply-To: {_address_header(owner_name or '', _ascii_domain(owner_email))}")
    days = CONFIRM_MAX_AGE_SECONDS // 86400
    greeting = f"Hello {first_name}," if first_name else "Hello,"
    text = (
        f"{greeting}\n\n"
        f"Please confirm that you want to subscribe to {form_title}:\n\n"
        f"{confirm_url}\n\n"
        f"The link works for {days} days. If you did not ask to subscribe, ignore this email: "
        "you will not be added.\n"
    )
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(confirmation_subject(form_title))}</title></head>"
        '<body style="font-family:sans-serif;line-height:1.5">'
        f"<p>{html.escape(greeting)}</p>"
        f"<p>Please confirm that you want to subscribe to <strong>{html.escape(form_title)}</strong>.</p>"
        f'<p><a href="{html.escape(confirm_url)}" style="display:inline-block;padding:10px 16px;'
        'background:#1a56db;color:#ffffff;text-decoration:none;border-radius:4px">'
        "Confirm my subscription</a></p>"
        f"<p>Or open this link: {html.escape(confirm_url)}</p>"
        f"<p>The link works for {days} days. If you did not ask to subscribe, ignore this email: "
        "you will not be added.</p></body></html>"
    )
    return ConfirmationEmail(sender, recipient, multipart_alternative(headers, text, page))
