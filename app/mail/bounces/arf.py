"""Spam complaints as ARF reports (RFC 5965): a feedback-loop email turned into a complaint `Report`.

Mailbox providers (Yahoo and AOL's feedback loop, Microsoft's JMRP, most ISPs) send a complaint as a
`multipart/report; report-type=feedback-report` email: a human-readable first part, a
`message/feedback-report` second part of `Field: value` lines (Feedback-Type, Original-Rcpt-To,
Original-Mail-From, ...), and a third part holding the original email (`message/rfc822`) or only its
headers (`text/rfc822-headers`). The bounce mailbox ingest hands each such email to `complaint_report`,
and the report goes through bounces.apply_reports like any other.

Which email the complaint is about: the original's Message-ID (Tidings writes ids that name their
deliverable), else the latest email sent to the recipient. The recipient is the report's
Original-Rcpt-To, else the original's To (Yahoo redacts neither; some providers redact the
local part of one of them, then the other decides). A report of Feedback-Type `not-spam` or
`auth-failure`, or an email that is no feedback report, gives None.
"""

from __future__ import annotations

from email import message_from_bytes, message_from_string, policy
from email.message import Message
from email.utils import getaddresses

from pydantic import ValidationError

from app.mail.bounces.reports import Report

# Feedback types that are not a recipient's complaint about the email.
NOT_COMPLAINTS = {"not-spam", "auth-failure"}


def complaint_report(raw: bytes | str | Message) -> Report | None:
    """The complaint an ARF email reports, or None when it is not a complaint report (never raises for
    a malformed email)."""
    try:
        message = _parsed(raw)
        if message.get_content_type() != "multipart/report":
            return None
        report_type = message.get_param("report-type", header="content-type")
        if not isinstance(report_type, str) or report_type.lower() != "feedback-report":
            return None
        feedback, original = _parts(message)
        if feedback is None:
            return None
        kind = str(feedback.get("Feedback-Type", "abuse")).strip().lower()
        if kind in NOT_COMPLAINTS:
            return None
        email = _address(feedback.get_all("Original-Rcpt-To") or [])
        if email is None and original is not None:
            email = _address(original.get_all("To") or [])
        if email is None:
            return None
        message_id = str(original.get("Message-ID", "")).strip() if original is not None else ""
        return Report(type="complaint", email=email, message_id=message_id or None)
    except (ValidationError, ValueError, TypeError, LookupError, IndexError):
        return None


def _parsed(raw: bytes | str | Message) -> Message:
    if isinstance(raw, Message):
        return raw
    if isinstance(raw, bytes):
        return message_from_bytes(raw, policy=policy.compat32)
    return message_from_string(raw, policy=policy.compat32)


def _parts(message: Message) -> tuple[Message | None, Message | None]:
    """(the feedback fields, the original email or its headers), each None when missing."""
    feedback: Message | None = None
    original: Message | None = None
    payload = message.get_payload()
    for part in payload if isinstance(payload, list) else []:
        if not isinstance(part, Message):
            continue
        kind = part.get_content_type()
        if kind == "message/feedback-report":
            feedback = _fields(part)
        elif kind in ("message/rfc822", "text/rfc822-headers") and original is None:
            original = _fields(part)
    return feedback, original


def _fields(part: Message) -> Message | None:
    """The header block a part carries: parsed already as a message (message/*), or its text."""
    inner = part.get_payload()
    if isinstance(inner, list):
        return inner[0] if inner and isinstance(inner[0], Message) else None
    if isinstance(inner, Message):
        return inner
    text = part.get_payload(decode=True)
    if isinstance(text, bytes):
        return message_from_bytes(text.lstrip(b"\r\n"), policy=policy.compat32)
    return message_from_string(str(inner).lstrip("\r\n"), policy=policy.compat32)


def _address(values: list[str]) -> str | None:
    """The first address of header values (`a@b`, `<a@b>`, `Ann <a@b>`, `rfc822; a@b`)."""
    for value in values:
        text = str(value).strip()
        if ";" in text and text.split(";", 1)[0].strip().lower() == "rfc822":
            text = text.split(";", 1)[1].strip()
        for _, address in getaddresses([text]):
            if "@" in address:
                return address.strip()
    return None
