"""Bounce and complaint webhooks of email providers (`POST /webhooks/bounces/{provider}`): each module
checks its provider's signature or secret and translates the provider's events into the reports of
`app/mail/bounces/reports.py`, which applies them (idempotently: a provider retries, and a repeated report
changes nothing). The URLs and settings are in docs/deliverability.md.

What every provider module shares: the body is JSON of at most 2 MiB (413 past it), a body that is not
what the provider sends is 422 `{"message", "errors"}`, and events that are no bounce, complaint or
unsubscribe (deliveries, opens, clicks) are skipped: they count as ignored.

Replay: where a provider signs a time (Mailgun's `timestamp`, SendGrid's timestamp header, SNS's
`Timestamp`), a signature more than SIGNATURE_TOLERANCE away from now, either way, is refused as a
forged one is (401). Mailgun signs only timestamp + token, not the event, so its token is single-use
besides: remembered in the database (every process agrees) with a digest of its body while the
signature is fresh; the same token with another body is 401, the provider's own retry (the same body)
is answered again (applying reports twice changes nothing).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db import upsert
from app.kit.errors import DomainError, ValidationFailed
from app.kit.json_types import JsonObject
from app.mail.bounces.bounce_classes import BounceClass
from app.mail.bounces.reports import MAX_REPORTS, Report, apply_reports
from app.mail.input import laravel_errors
from app.mail.sending.queue import BounceRule
from app.mail.sending.tokens import MailTokens
from app.models import ProviderToken

ReportType = Literal["bounce", "complaint", "unsubscribe"]
Hardness = BounceClass


# How far a signed time may be from this server's clock, either way: the provider's clock and ours
# disagree by seconds, a delivery takes seconds, and a retry is signed afresh (SNS's default delivery
# policy retries within a minute of publishing). Past it a captured request is worth nothing.
SIGNATURE_TOLERANCE = timedelta(minutes=5)


class Replayed(DomainError):
    """A single-use token seen before with another body: refused as an unsigned body is."""

    def __init__(self) -> None:
        super().__init__(401, "Unauthenticated.", code="not_authenticated")


def fresh(signed_at: datetime, now: datetime) -> bool:
    return abs(now - signed_at) <= SIGNATURE_TOLERANCE


@dataclass(frozen=True, slots=True)
class SingleUse:
    """A signature's single-use token, to be remembered with the reports it brought."""

    provider: str
    token: str
    body: bytes
    signed_at: datetime


@dataclass(slots=True)
class Events:
    """A provider's body as reports, the number of its events that are no report, and the token that
    must not be used again with another body (Mailgun's)."""

    reports: list[Report] = field(default_factory=list)
    skipped: int = 0
    single_use: SingleUse | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    processed: int
    ignored: int


def apply_events(
    session: Session, events: Events, now: datetime, rule: BounceRule, tokens: MailTokens
) -> Answer:
    """Apply the reports as POST /webhooks/bounces does, MAX_REPORTS at a time (a SendGrid batch can
    hold many more, and each chunk's statements list its ids), in the caller's transaction; Replayed
    when the single-use token came before with another body."""
    if events.single_use is not None:
        remember(session, events.single_use, now)
    processed = ignored = 0
    reports: Sequence[Report] = events.reports
    for start in range(0, len(reports), MAX_REPORTS):
        applied = apply_reports(session, reports[start : start + MAX_REPORTS], now, rule, tokens)
        processed += applied.processed
        ignored += applied.ignored
    return Answer(processed, ignored + events.skipped)


def remember(session: Session, single_use: SingleUse, now: datetime) -> None:
    """Record the token in the caller's transaction (so a request that fails leaves it unused), and
    forget the tokens whose signatures are stale: they are refused before they get here. Concurrent
    first uses meet at the primary key: the later one waits for the earlier, then finds its row."""
    session.execute(delete(ProviderToken).where(ProviderToken.signed_at < now - 2 * SIGNATURE_TOLERANCE))
    token_sha256 = hashlib.sha256(single_use.token.encode("utf-8", "surrogateescape")).hexdigest()
    body_sha256 = hashlib.sha256(single_use.body).hexdigest()
    inserted = session.scalar(
        upsert(session, ProviderToken)
        .values(
            provider=single_use.provider,
            token_sha256=token_sha256,
            body_sha256=body_sha256,
            signed_at=single_use.signed_at,
        )
        .on_conflict_do_nothing()
        .returning(ProviderToken.token_sha256)
    )
    if inserted is not None:
        return
    seen_with = session.scalar(
        select(ProviderToken.body_sha256).where(
            ProviderToken.provider == single_use.provider, ProviderToken.token_sha256 == token_sha256
        )
    )
    if seen_with != body_sha256:
        raise Replayed()


def load_json(body: bytes) -> Any:
    """The body (read within MAX_BODY_BYTES by the route) as JSON, or 422."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ValidationFailed({"body": ["The request body is not valid JSON."]}) from exc


def invalid(where: str, message: str) -> ValidationFailed:
    return ValidationFailed({where: [message]})


def an_object(value: Any, where: str) -> JsonObject:
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
