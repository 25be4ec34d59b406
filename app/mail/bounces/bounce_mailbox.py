"""The bounce mailbox: delivery status notifications (DSNs, RFC 3464) that come back to the VERP envelope
sender, read and applied to the email they are about.

With TIDINGS_BOUNCE_DOMAIN set, each email leaves with the envelope sender
`bounces+<deliverable id>-<12 hex digits of HMAC-SHA256>@<domain>` (render.py, tokens.py). A DSN reaches
Tidings through `tidings bounces ingest` (a Postfix pipe transport) or the IMAP mailbox the worker polls
(bounce_imap.py); either way `ingest_message` decides:

- Which email: the deliverable named by a VERP address we signed, found in the envelope recipient given
  by the MTA, else the DSN's Delivered-To, X-Original-To, Envelope-To, To or Return-Path, else the
  returned original message's headers; failing all of those, the deliverable whose Message-ID the
  returned original message carries (render.py makes it `<opaque token@From domain>`, tokens.py, and the
  whole id must equal the one recorded). A DSN naming neither is ignored: the recipient address alone is
  not trusted, or anyone could mark any subscriber bounced by mailing the bounce address.
- What happened, whatever the wording: the `Status` and `Diagnostic-Code` of the message/delivery-status
  part's recipient blocks, classified by bounce_classes.py (5.1.x: hard; 5.7.x and other refusals of the
  sender: blocked; 4.x.x or `Action: delayed`: soft; `delivered`, `relayed` and `expanded` are not
  bounces). A bounce without a delivery-status part (older Exim, qmail, some Exchange servers) is read
  by GNU Mailman's detectors (`flufl.bounce`): a temporary failure is soft, a permanent one is
  classified by the SMTP reply its text quotes (hard when it quotes none).
- Then it is reported through `bounces.apply_reports` like a webhook report, with the deliverable's own
  recipient and Message-ID, so the effects (and their idempotence) are the webhook's: docs/email-api.md.

An unsubscribe request: mail a person sends to the List-Unsubscribe mailto address
`unsubscribe+<deliverable id>-<12 hex digits of another HMAC>@<domain>` (render.py) unsubscribes that
email's contact, and only it (the address is signed, so no one can write one for another contact);
reports and automatic replies to it are not requests.

A complaint (ARF, multipart/report; report-type=feedback-report, read by `arf.complaint_report`; its
`not-spam` and `auth-failure` reports are not complaints) is applied as a complaint report about the
email its signed VERP address or its copied Message-ID names, never about an address alone: anyone can
send the mailbox a report naming an address.

A message nested deeper than the parser can follow (more than MAX_NESTED_PARTS multipart or message
parts: real bounces have a handful) is not parsed at all: it is "ignored: unreadable", as is any message
the parser or a detector cannot read. Nothing a sender writes makes ingesting fail.
"""

from __future__ import annotations

import base64
import email
import email.policy
import logging
import quopri
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.message import Message
from typing import Literal

from flufl.bounce import all_failures
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.mail.bounces.arf import complaint_report
from app.mail.bounces.bounce_classes import BounceClass, classify, enhanced_status
from app.mail.bounces.reports import Report, apply_reports, deliverable_id_of
from app.mail.sending.queue import BounceRule
from app.mail.sending.render import UNSUBSCRIBE_PREFIX, VERP_PREFIX
from app.mail.sending.tokens import MailTokens
from app.models import Contact, Deliverable

log = logging.getLogger("tidings.bounces")
# flufl.bounce logs each detector it runs (INFO) and every detector's exception with its traceback before
# raising it (a message without a From header trips one): on every message that is no bounce. Its
# failures are reported here, in one line.
logging.getLogger("flufl.bounce").setLevel(logging.CRITICAL)

# A DSN carries the delivery-status part before the returned message; what lies beyond this is not read
# (a bounce of a 20 MB email need not be held whole).
MAX_MESSAGE_BYTES = 1024 * 1024
# The parser recurses once per nested multipart or message part; a real bounce holds a handful (the
# report, the returned message, its alternatives). Counted on the raw bytes, before parsing.
MAX_NESTED_PARTS = 64
NESTING_HEADER = re.compile(rb"^content-type:\s*(multipart|message)/", re.IGNORECASE | re.MULTILINE)
VERP_ADDRESS = re.compile(re.escape(VERP_PREFIX) + r"([0-9A-Za-z-]{1,40})@", re.IGNORECASE)
UNSUBSCRIBE_ADDRESS = re.compile(re.escape(UNSUBSCRIBE_PREFIX) + r"([0-9A-Za-z-]{1,40})@", re.IGNORECASE)
STATUS = re.compile(r"\b([245])\.\d{1,3}\.\d{1,3}\b")
# A permanent SMTP reply quoted in a text bounce, with whatever follows it on the line.
TEXT_REPLY = re.compile(r"\b5\d\d[ -].*")
# Headers of the DSN, then of the returned message, where MTAs write the address a message came to.
COPIED_MESSAGE_ID = re.compile(r"^Message-ID:[ \t]*(<[^<>\s]{1,900}>)", re.IGNORECASE | re.MULTILINE)
RECIPIENT_HEADERS = ("Delivered-To", "X-Original-To", "Envelope-To", "X-Envelope-To", "To", "Return-Path")
# Where an unsubscribe request names the address it was sent to (never the returned message's headers).
REQUEST_HEADERS = ("Delivered-To", "X-Original-To", "Envelope-To", "X-Envelope-To", "To", "Cc")

Kind = Literal["hard", "blocked", "soft", "complaint", "unsubscribe", "none", "unreadable"]
BOUNCE_KINDS: tuple[Kind, ...] = ("hard", "blocked", "soft")
# How much of a text bounce (no delivery-status part) is searched for the receiver's reply.
MAX_DIAGNOSTIC_TEXT = 64 * 1024


@dataclass(frozen=True, slots=True)
class Dsn:
    """What a message says, before the database is asked: its kind, and the ways to find its email."""

    kind: Kind
    status: str | None
    verp_deliverable_id: int | None
    message_id: str | None
    # The receiver's reply (Diagnostic-Code, or the line of a text bounce), kept with a blocked refusal.
    diagnostic: str | None = None


@dataclass(frozen=True, slots=True)
class Ingested:
    kind: Kind
    status: str | None
    deliverable_id: int | None
    applied: bool

    def describe(self) -> str:
        if self.kind == "none":
            return "ignored: not a bounce"
        if self.kind == "unsubscribe":
            if self.deliverable_id is None:
                return "ignored: an unsubscribe request naming no email sent by Tidings"
            return f"unsubscribe request for deliverable {self.deliverable_id}"
        if self.kind == "unreadable":
            return "ignored: unreadable"
        if self.kind == "complaint":
            if self.deliverable_id is None:
                return "ignored: a complaint report (ARF) naming no email sent by Tidings"
            return f"complaint about deliverable {self.deliverable_id}"
        if self.deliverable_id is None:
            return f"ignored: a {self.kind} bounce naming no email sent by Tidings"
        status = f" ({self.status})" if self.status else ""
        return f"{self.kind} bounce{status} of deliverable {self.deliverable_id}"


class Unreadable(Exception):
    """A message the parser cannot follow: nested too deep, or tripping the parser."""


def parse_message(raw: bytes) -> Message:
    """The message (its first MAX_MESSAGE_BYTES); Unreadable when nested past MAX_NESTED_PARTS."""
    kept = raw[:MAX_MESSAGE_BYTES]
    for nested, _ in enumerate(NESTING_HEADER.finditer(kept), start=1):
        if nested > MAX_NESTED_PARTS:
            raise Unreadable(f"more than {MAX_NESTED_PARTS} nested parts")
    try:
        return email.message_from_bytes(kept, policy=email.policy.compat32)
    except RecursionError as exc:
        raise Unreadable("nested deeper than the parser follows") from exc


def read_dsn(message: Message, tokens: MailTokens, envelope_recipients: Sequence[str] = ()) -> Dsn:
    """Classify a message and find what names its email; no database."""
    unsubscribing = _unsubscribe_request(message, tokens, envelope_recipients)
    if unsubscribing is not None:
        return Dsn("unsubscribe", None, unsubscribing, None)
    verp = _verp_deliverable(tokens, _recipient_candidates(message, envelope_recipients))
    original = _original_headers(message)
    message_id = original.get("Message-ID") if original is not None else _message_id_in_text(message)
    report_type = message.get_param("report-type")
    if (
        message.get_content_type() == "multipart/report"
        and isinstance(report_type, str)
        and report_type.lower() == "feedback-report"
    ):
        return Dsn("complaint", None, verp, message_id)
    kind, status, diagnostic = _status_of(message)
    return Dsn(kind, status, verp, message_id.strip() if message_id else None, diagnostic)


def ingest_message(
    session: Session,
    raw: bytes,
    tokens: MailTokens,
    now: datetime,
    rule: BounceRule,
    envelope_recipients: Sequence[str] = (),
) -> Ingested:
    """Read one message from the bounce mailbox and apply it (in the caller's transaction)."""
    try:
        message = parse_message(raw)
        dsn = read_dsn(message, tokens, envelope_recipients)
    except (Unreadable, RecursionError) as exc:
        log.info("bounce mailbox message unreadable: %s", exc)
        return Ingested("unreadable", None, None, applied=False)
    if dsn.kind == "complaint":
        complaint = complaint_report(message)
        if complaint is None:  # a `not-spam` or `auth-failure` report, or a malformed one
            return Ingested("none", None, None, applied=False)
        if dsn.message_id is None and complaint.message_id:
            dsn = Dsn("complaint", None, dsn.verp_deliverable_id, complaint.message_id)
    elif dsn.kind not in (*BOUNCE_KINDS, "unsubscribe"):
        return Ingested(dsn.kind, dsn.status, None, applied=False)
    found = _deliverable(session, dsn, tokens)
    if found is None:
        return Ingested(dsn.kind, dsn.status, None, applied=False)
    deliverable_id, email_key, message_id = found
    if dsn.kind in ("complaint", "unsubscribe"):
        report = Report(type=dsn.kind, email=email_key, message_id=message_id)
    else:  # already classified (_status_of): the report carries the class and the receiver's words
        report = Report(
            type="bounce", email=email_key, message_id=message_id, bounce_type=dsn.kind
        ).model_copy(update={"diagnostic": dsn.diagnostic})
    applied = apply_reports(session, [report], now, rule, tokens)
    return Ingested(dsn.kind, dsn.status, deliverable_id, applied=applied.processed == 1)


def _deliverable(session: Session, dsn: Dsn, tokens: MailTokens) -> tuple[int, str, str | None] | None:
    """(id, recipient's email key, Message-ID) of the deliverable the DSN is about, or None."""
    by_message_id = None
    if dsn.verp_deliverable_id is None and dsn.message_id:
        by_message_id = deliverable_id_of(dsn.message_id, tokens)
    wanted = dsn.verp_deliverable_id or by_message_id
    if wanted is None:
        return None
    row = session.execute(
        select(Deliverable.id, Contact.email_key, Deliverable.message_id)
        .join(Contact, Contact.id == Deliverable.contact_id)
        .where(Deliverable.id == wanted)
    ).one_or_none()
    if row is None:
        return None
    if by_message_id is not None and _bare(row.message_id) != _bare(dsn.message_id):
        return None  # a Message-ID of the right shape that we never sent
    return row.id, row.email_key, row.message_id


def _unsubscribe_request(
    message: Message, tokens: MailTokens, envelope_recipients: Sequence[str]
) -> int | None:
    """The deliverable whose signed List-Unsubscribe address (`unsubscribe+<token>@<bounce domain>`) a
    person wrote to, or None. Only the envelope and the message's own recipient headers count (a bounce
    quoting the address does not), and neither a report nor an automatic reply (RFC 3834's
    Auto-Submitted: a vacation notice) is a request."""
    if message.get_content_type() == "multipart/report":
        return None
    auto = str(message.get("Auto-Submitted", "no")).strip().lower()
    if auto and auto != "no":
        return None
    candidates = [
        *envelope_recipients,
        *(str(value) for header in REQUEST_HEADERS for value in message.get_all(header, [])),
    ]
    for candidate in candidates:
        for match in UNSUBSCRIBE_ADDRESS.finditer(candidate):
            deliverable_id = tokens.read_unsubscribe_address(match.group(1))
            if deliverable_id is not None:
                return deliverable_id
    return None


def _recipient_candidates(message: Message, envelope_recipients: Sequence[str]) -> Iterable[str]:
    yield from envelope_recipients
    for header in RECIPIENT_HEADERS:
        yield from (str(value) for value in message.get_all(header, []))
    original = _original_headers(message)
    if original is not None:
        for header in ("Return-Path", "Sender", "Errors-To"):
            yield from (str(value) for value in original.get_all(header, []))


def _verp_deliverable(tokens: MailTokens, candidates: Iterable[str]) -> int | None:
    for candidate in candidates:
        for match in VERP_ADDRESS.finditer(candidate):
            deliverable_id = tokens.read_verp(match.group(1))
            if deliverable_id is not None:
                return deliverable_id
    return None


def _original_headers(message: Message) -> Message | None:
    """The returned message's headers: the message/rfc822 or text/rfc822-headers part of a DSN."""
    for part in message.walk():
        content_type = part.get_content_type()
        if content_type in ("message/rfc822", "message/rfc822-headers"):
            payload = part.get_payload()
            if isinstance(payload, list) and payload and isinstance(payload[0], Message):
                return payload[0]
        elif content_type == "text/rfc822-headers":
            text = part.get_payload(decode=True)
            if isinstance(text, bytes):
                return email.message_from_bytes(text, policy=email.policy.compat32)
    return None


def _message_id_in_text(message: Message) -> str | None:
    """The returned message's Message-ID in a bounce that copies it as text below its own words
    (Exim's "------ This is a copy of the message", qmail's "--- Below this line")."""
    for part in message.walk():
        if part.get_content_type() != "text/plain":
            continue
        body = part.get_payload(decode=True)
        if isinstance(body, bytes):
            match = COPIED_MESSAGE_ID.search(body.decode("utf-8", "replace"))
            if match is not None:
                return match.group(1)
    return None


def _status_of(message: Message) -> tuple[Kind, str | None, str | None]:
    """The worst outcome (hard, then blocked, then soft) among the recipient blocks of the
    delivery-status parts, each classified by its Status and Diagnostic-Code (bounce_classes.py);
    flufl.bounce's detectors for a bounce without one, the class then read from its text."""
    blocks = [
        block
        for part in message.walk()
        if part.get_content_type() == "message/delivery-status"
        for block in _status_blocks(part)
    ]
    if blocks:
        outcomes: list[tuple[Kind, str | None, str | None]] = []
        for block in blocks:
            action = str(block.get("Action", "")).strip().lower()
            match = STATUS.search(str(block.get("Status", "")))
            status = match.group(0) if match else None
            if action in ("delivered", "relayed", "expanded") or (match and match.group(1) == "2"):
                continue
            diagnostic = " ".join(str(block.get("Diagnostic-Code", "")).split()) or None
            if match is not None:
                reported: BounceClass = "hard" if match.group(1) == "5" else "soft"
                kind = classify(f"{status} {diagnostic or ''}", reported)
                outcomes.append((kind, status, diagnostic or status))
            elif action == "failed":
                outcomes.append((classify(diagnostic, "hard"), None, diagnostic))
            elif action == "delayed":
                outcomes.append(("soft", None, diagnostic))
        for wanted in BOUNCE_KINDS:
            for outcome in outcomes:
                if outcome[0] == wanted:
                    return outcome
        return "none", None, None
    try:
        temporary, permanent = all_failures(message)
    except Exception as exc:  # a heuristic detector tripping over odd input: not a bounce we can read
        log.info("flufl.bounce's detectors could not read a message: %s: %s", type(exc).__name__, exc)
        return "none", None, None
    if permanent:
        reply = _reply_in_text(message)
        return classify(reply, "hard"), enhanced_status(reply), reply
    if temporary:
        return "soft", None, None
    return "none", None, None


def _reply_in_text(message: Message) -> str | None:
    """The receiver's reply quoted in a text bounce (Exim: "SMTP error from remote mail server after
    RCPT TO:<...>: 550 5.7.1 ..."): the first line with a 5xx reply code."""
    for part in message.walk():
        if part.get_content_type() != "text/plain":
            continue
        body = part.get_payload(decode=True)
        if not isinstance(body, bytes):
            continue
        for line in body[:MAX_DIAGNOSTIC_TEXT].decode("utf-8", "replace").splitlines():
            match = TEXT_REPLY.search(line)
            if match is not None:
                return match.group(0).strip()[:998]
        return None
    return None


def _status_blocks(part: Message) -> list[Message]:
    """The per-recipient field blocks of a message/delivery-status part (the first is per-message)."""
    payload = part.get_payload()
    encoding = str(part.get("Content-Transfer-Encoding", "")).strip().lower()
    if isinstance(payload, list) and encoding not in ("base64", "quoted-printable"):
        blocks = [block for block in payload if isinstance(block, Message)]
    else:  # Exchange encodes the part in base64, which the parser leaves (or parses as) undecoded text
        if isinstance(payload, list):
            payload = "\n".join(block.as_string() for block in payload if isinstance(block, Message))
        data = _decoded(payload, encoding)
        text = data.decode("utf-8", "replace")
        blocks = [
            email.message_from_string(chunk.strip() + "\n", policy=email.policy.compat32)
            for chunk in re.split(r"\r?\n\s*\r?\n", text)
            if chunk.strip()
        ]
    return [block for block in blocks if block.get("Action") or block.get("Status")]


def _decoded(payload: object, encoding: str) -> bytes:
    text = str(payload)
    try:
        if encoding == "base64":
            return base64.b64decode("".join(text.split()), validate=False)
        if encoding == "quoted-printable":
            return quopri.decodestring(text.encode("ascii", "replace"))
    except ValueError:
        return b""
    return text.encode("utf-8", "replace")


def _bare(message_id: str | None) -> str:
    return (message_id or "").strip().strip("<>").lower()
