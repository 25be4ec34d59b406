"""Bounce and complaint webhooks of email providers (`POST /webhooks/bounces/{provider}`): each module
checks its provider's signature or secret and translates the provider's events into the reports of
`app/mail/bounces.py`, which applies them (idempotently: a provider retries, and a repeated report
changes nothing). The URLs and settings are in docs/deliverability.md.

What every provider module shares: the body is JSON of at most 2 MiB (413 past it), a body that is not
what the provider sends is 422 `{"message", "errors"}`, and events that are no bounce, complaint or
unsubscribe (deliveries, opens, clicks) are skipped: they count as ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.kit.errors import ValidationFailed
from app.mail.bounce_classes import BounceClass
from app.mail.bounces import MAX_BODY_BYTES, MAX_REPORTS, BodyTooLarge, Report, apply_reports
from app.mail.input import laravel_errors
from app.mail.sending.queue import BounceRule

ReportType = Literal["bounce", "complaint", "unsubscribe"]
Hardness = BounceClass


@dataclass(slots=True)
class Events:
    """A provider's body as reports, and the number of its events that are no report."""

    reports: list[Report] = field(default_factory=list)
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class Answer:
    processed: int
    ignored: int


def apply_events(session: Session, events: Events, now: datetime, rule: BounceRule) -> Answer:
    """Apply the reports as POST /webhooks/bounces does, MAX_REPORTS at a time (a SendGrid batch can
    hold many more, and each chunk's statements list its ids), in the caller's transaction."""
    processed = ignored = 0
    reports: Sequence[Report] = events.reports
    for start in range(0, len(reports), MAX_REPORTS):
        applied = apply_reports(session, reports[start : start + MAX_REPORTS], now, rule)
        processed += applied.processed
        ignored += applied.ignored
    return Answer(processed, ignored + events.skipped)


def load_json(body: bytes) -> Any:
    """The body as JSON, or 413 / 422."""
    if len(body) > MAX_BODY_BYTES:
        raise BodyTooLarge()
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ValidationFailed({"body": ["The request body is not valid JSON."]}) from exc


def invalid(where: str, message: str) -> ValidationFailed:
    return ValidationFailed({where: [message]})


def an_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(where, f"The {where} must be an object.")
    return value


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def make_report(
    where: str,
    type: ReportType,
    email: Any,
    message_id: Any = None,
    bounce_type: Hardness = "hard",
    diagnostic: Any = None,
) -> Report:
    """A report, or 422 naming the event (`where`) whose address or message id is unusable.
    `diagnostic` is the receiver's reply or status as the provider passes it on: with it, the one
    classifier of bounce_classes.py decides between hard, blocked and soft (the provider's own type,
    `bounce_type`, is what it falls back on)."""
    try:
        return Report.model_validate(
            {
                "type": type,
                "email": email,
                "message_id": text_or_none(message_id),
                "bounce_type": bounce_type,
                "diagnostic": _diagnostic(diagnostic),
            }
        )
    except ValidationError as exc:
        errors = laravel_errors(exc.errors())
        raise ValidationFailed({f"{where}.{key}": messages for key, messages in errors.items()}) from exc


def _diagnostic(value: Any) -> str | None:
    """The provider's words, cut to what a report holds; what is not text is left out."""
    text = text_or_none(value)
    return text.replace("\x00", "")[:998] if text is not None else None


def header_value(headers: Any, name: str) -> str | None:
    """A header's value from a list of `{name|Name, value|Value}` objects (SES, Postmark) or a mapping."""
    wanted = name.lower()
    if isinstance(headers, dict):
        for key, value in headers.items():
            if isinstance(key, str) and key.lower() == wanted:
                return text_or_none(value)
        return None
    if isinstance(headers, list):
        for header in headers:
            if not isinstance(header, dict):
                continue
            key = header.get("name", header.get("Name"))
            if isinstance(key, str) and key.lower() == wanted:
                return text_or_none(header.get("value", header.get("Value")))
    return None


def same_secret(given: str, secret: str) -> bool:
    """Constant-time comparison of digests of equal length (compare_digest would otherwise tell the
    secret's length by its timing)."""
    return hmac.compare_digest(_digest(given), _digest(secret))


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()
