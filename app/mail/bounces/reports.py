"""Bounce, complaint and unsubscribe reports from the SMTP relay (`POST /webhooks/bounces`): the body
format, and applying reports to deliverables and contacts.

What the relay is to send (SendFox's documents have no such route; docs/email-api.md):

- Authentication: `Authorization: Bearer <TIDINGS_BOUNCE_WEBHOOK_SECRET>`, compared in constant time;
  401 `{"message": "Unauthenticated."}` without it. While the setting is empty the route does not
  exist (404).
- Body: JSON, one report object or an array of at most 1000 of them (at most 2 MiB):

  ```json
  {"type": "bounce", "email": "ann@example.com", "message_id": "<0f3a...91c2@example.com>",
   "bounce_type": "hard"}
  ```

  `type` is `bounce`, `complaint` or `unsubscribe`; `email` (required) is the recipient's address;
  `message_id` (optional) the Message-ID header of the email the report is about, with or without
  its angle brackets; `bounce_type` (optional, bounces only) `hard` (default), `blocked` or `soft`;
  `diagnostic` (optional) the receiver's reply or status (`smtp; 550 5.7.26 ...`), which decides the
  class when given (bounce_classes.py: a policy refusal is `blocked` even if reported as hard). Other
  keys are ignored. An invalid body is 422 `{"message", "errors"}`, errors keyed by field (`0.type` in an
  array); a body over the limit is 413.
- Which email a report is about: the deliverable with that message_id when its recipient is that
  email; otherwise the most recently sent deliverable to that address (in any account). A report that
  finds none is ignored: unknown addresses, never-emailed contacts, foreign message ids.
- A hard bounce sets the deliverable's bounced_at (and its state `sent` becomes `bounced`) and the
  contact's bounced_at, puts the address on the account's suppression list (suppression_service.py)
  and cancels the contact's queued emails. A blocked bounce (the receiver refused the sender) is
  recorded per receiving domain (blocked.py) and suppresses nothing. A soft bounce is counted as
  processed and changes nothing: the relay retries, and a later hard bounce settles it.
- A complaint sets the deliverable's spam_at (the campaign's stats count it as `spam_count`),
  unsubscribes the contact and puts the address on the suppression list; unsubscribe unsubscribes.
- Then every campaign that got a hard bounce or a complaint is checked against the stop rule
  (`BounceRule`: TIDINGS_BOUNCE_STOP_RATE of at least TIDINGS_BOUNCE_STOP_MIN_SENT attempted emails
  bounced, or TIDINGS_COMPLAINT_STOP_RATE of at least TIDINGS_COMPLAINT_STOP_MIN_SENT delivered emails
  complained, or TIDINGS_BLOCKED_STOP_RATE of its attempted emails to one receiving domain blocked,
  at least TIDINGS_BLOCKED_STOP_MIN of them) and halted past it.
  The deliverable's unsubscribed_at is set when the report is what unsubscribed the contact.
- Every stamp is set once: a repeated report changes nothing (and still counts as processed).
- Answer: 200 `{"processed": n, "ignored": m}`, n + m being the number of reports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.kit.errors import ValidationFailed
from app.mail.bounces.blocked import Refusal, record_blocked
from app.mail.bounces.bounce_classes import BounceClass, classify
from app.mail.contact_service import cancel_queued, unsubscribe_contacts
from app.mail.events.emit import ContactEvent, emit_per_account
from app.mail.events.types import EventType
from app.mail.input import laravel_errors
from app.mail.sending.queue import BounceRule, stop_bouncing_campaigns
from app.mail.sending.tokens import MailTokens
from app.mail.suppression_service import suppress_contacts
from app.models import Contact, Deliverable, DeliverableState

MAX_REPORTS = 1000
MAX_BODY_BYTES = 2 * 1024 * 1024
# What render.py writes: <{deliverable_id}.{campaign_id}.{random hex}@{host}>. Ids are 32-bit.
# The Message-ID Tidings writes, `<token@from domain>` (MailTokens.message_id_token), and the one it
# wrote before, `<deliverable.campaign.random@host>`, which reports about older email still name.
MESSAGE_ID = re.compile(r"<?([0-9a-fA-F]{32})@[^<>\s]+>?")
LEGACY_MESSAGE_ID = re.compile(r"<?([1-9][0-9]{0,9})\.[1-9][0-9]{0,9}\.[0-9a-f]+@[^<>\s]+>?")
MAX_ROW_ID = 2**31 - 1


def _storable(value: str) -> str:
    """Text the databases can hold and compare: no NUL (PostgreSQL refuses it), valid UTF-8 (a lone
    surrogate from a JSON escape cannot be encoded)."""
    if "\x00" in value:
        raise PydanticCustomError("nul", "must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PydanticCustomError("utf8", "must be valid UTF-8 text") from exc
    return value.strip()


Text = Annotated[str, Field(min_length=1, max_length=998), AfterValidator(_storable)]


class Report(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["bounce", "complaint", "unsubscribe"]
    email: Text
    message_id: Text | None = None
    bounce_type: BounceClass = "hard"
    # The receiver's words or status (`5.7.26`, `smtp; 550 5.1.1 user unknown`): when given, they decide
    # the bounce's class (bounce_classes.py), bounce_type being what to fall back on.
    diagnostic: Text | None = None

    def bounce_class(self) -> BounceClass:
        return classify(self.diagnostic, self.bounce_type) if self.diagnostic else self.bounce_type


_REPORTS = TypeAdapter(list[Report])


def parse_reports(body: bytes) -> list[Report]:
    """The webhook's body (read within MAX_BODY_BYTES) as reports, or 422 (never an exception of the
    parser's own)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ValidationFailed({"body": ["The request body is not valid JSON."]}) from exc
    if isinstance(parsed, dict):
        try:
            return [Report.model_validate(parsed)]
        except ValidationError as exc:
            raise ValidationFailed(laravel_errors(exc.errors())) from exc
    if not isinstance(parsed, list):
        raise ValidationFailed({"body": ["The request body must be a report object or an array of them."]})
    if len(parsed) > MAX_REPORTS:
        raise ValidationFailed({"body": [f"At most {MAX_REPORTS} reports are accepted at once."]})
    try:
        return _REPORTS.validate_python(parsed)
    except ValidationError as exc:
        raise ValidationFailed(laravel_errors(exc.errors())) from exc


@dataclass(frozen=True, slots=True)
class Target:
    deliverable_id: int
    campaign_id: int
    contact_id: int


@dataclass(frozen=True, slots=True)
class Applied:
    processed: int
    ignored: int


def apply_reports(
    session: Session, reports: Sequence[Report], now: datetime, rule: BounceRule, tokens: MailTokens
) -> Applied:
    """Apply the reports in a fixed number of statements, whatever their number (`tokens` read the
    reports' Message-IDs)."""
    targets = _find_targets(session, reports, tokens)
    found = [(r, t) for r, t in zip(reports, targets, strict=True) if t is not None]
    bounces = [(r, t) for r, t in found if r.type == "bounce"]
    hard = [t for r, t in bounces if r.bounce_class() == "hard"]
    blocked = [Refusal(t.deliverable_id, r.diagnostic) for r, t in bounces if r.bounce_class() == "blocked"]
    complaints = [t for r, t in found if r.type == "complaint"]
    leaving = [t for r, t in found if r.type in ("complaint", "unsubscribe")]
    if hard:
        _hard_bounces(session, hard, now)
    if complaints:
        stamped = _stamp_once(session, Deliverable.spam_at, [t.deliverable_id for t in complaints], now)
        _tell(session, EventType.CONTACT_COMPLAINED, stamped, now)
        suppress_contacts(session, [t.contact_id for t in complaints], "complaint", now)
    if leaving:
        changed = set(unsubscribe_contacts(session, sorted({t.contact_id for t in leaving}), now))
        # The first report about each contact that unsubscribed it names the email that made it leave.
        first_by_contact: dict[int, int] = {}
        for target in leaving:
            if target.contact_id in changed:
                first_by_contact.setdefault(target.contact_id, target.deliverable_id)
        _stamp_once(session, Deliverable.unsubscribed_at, list(first_by_contact.values()), now)
    refused_campaigns = record_blocked(session, blocked, now) if blocked else set()
    if hard or complaints or refused_campaigns:
        stopping = {t.campaign_id for t in [*hard, *complaints]} | refused_campaigns
        stop_bouncing_campaigns(session, stopping, now, rule)
    return Applied(processed=len(found), ignored=len(reports) - len(found))


def _hard_bounces(session: Session, targets: list[Target], now: datetime) -> None:
    ids = sorted({t.deliverable_id for t in targets})
    _tell(session, EventType.CONTACT_BOUNCED, _stamp_once(session, Deliverable.bounced_at, ids, now), now)
    session.execute(
        update(Deliverable)
        .where(Deliverable.id.in_(ids), Deliverable.state == DeliverableState.SENT)
        .values(state=DeliverableState.BOUNCED, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    contact_ids = sorted({t.contact_id for t in targets})
    session.execute(
        update(Contact)
        .where(Contact.id.in_(contact_ids), Contact.bounced_at.is_(None))
        .values(bounced_at=now, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    suppress_contacts(session, contact_ids, "bounce", now)
    cancel_queued(session, *contact_ids)


def _stamp_once(session: Session, column: Any, deliverable_ids: Iterable[int], now: datetime) -> list[Any]:
    """Set the column on the deliverables where it is empty; the rows this call set (account,
    contact, campaign), so a repeated report tells nobody anything twice."""
    ids = sorted(set(deliverable_ids))
    if not ids:
        return []
    return list(
        session.execute(
            update(Deliverable)
            .where(Deliverable.id.in_(ids), column.is_(None))
            .values({column.key: now, "updated_at": now})
            .returning(Deliverable.account_id, Deliverable.contact_id, Deliverable.campaign_id)
            .execution_options(synchronize_session=False)
        )
    )


def _tell(session: Session, event_type: EventType, stamped: list[Any], now: datetime) -> None:
    events = [(row.account_id, ContactEvent(row.contact_id, campaign_id=row.campaign_id)) for row in stamped]
    emit_per_account(session, event_type, events, now)


def _find_targets(session: Session, reports: Sequence[Report], tokens: MailTokens) -> list[Target | None]:
    """The deliverable each report is about (None when there is none): by message_id, else by email."""
    wanted: dict[int, str] = {}
    for report in reports:
        deliverable_id = deliverable_id_of(report.message_id, tokens)
        if deliverable_id is not None:
            wanted[deliverable_id] = report.message_id or ""
    by_id: dict[int, tuple[Target, str, str | None]] = {}
    if wanted:
        for row in session.execute(
            select(
                Deliverable.id,
                Deliverable.campaign_id,
                Deliverable.contact_id,
                Deliverable.message_id,
                Contact.email_key,
            )
            .join(Contact, Contact.id == Deliverable.contact_id)
            .where(Deliverable.id.in_(sorted(wanted)))
        ):
            by_id[row.id] = (Target(row.id, row.campaign_id, row.contact_id), row.email_key, row.message_id)
    targets: list[Target | None] = []
    unresolved: set[str] = set()
    for report in reports:
        found = by_id.get(deliverable_id_of(report.message_id, tokens) or 0)
        if (
            found is not None
            and found[1] == report.email.lower()
            and _bare(found[2]) == _bare(report.message_id)
        ):
            targets.append(found[0])
        else:
            targets.append(None)
            unresolved.add(report.email.lower())
    if unresolved:
        latest = _latest_sent_to(session, unresolved)
        targets = [
            target if target is not None else latest.get(report.email.lower())
            for report, target in zip(reports, targets, strict=True)
        ]
    return targets


def _latest_sent_to(session: Session, email_keys: set[str]) -> dict[str, Target]:
    """For each address, the deliverable most recently sent to it, in any account."""
    ranked = (
        select(
            Deliverable.id,
            Deliverable.campaign_id,
            Deliverable.contact_id,
            Contact.email_key,
            func.row_number()
            .over(
                partition_by=Contact.email_key,
                order_by=(Deliverable.sent_at.desc(), Deliverable.id.desc()),
            )
            .label("recency"),
        )
        .join(Contact, Contact.id == Deliverable.contact_id)
        .where(Contact.email_key.in_(sorted(email_keys)), Deliverable.sent_at.is_not(None))
        .subquery()
    )
    return {
        row.email_key: Target(row.id, row.campaign_id, row.contact_id)
        for row in session.execute(select(ranked).where(ranked.c.recency == 1))
    }


def deliverable_id_of(message_id: str | None, tokens: MailTokens) -> int | None:
    """The deliverable a Message-ID of ours names (then still to be matched whole against the one
    recorded when it was sent), else None."""
    if not message_id:
        return None
    match = MESSAGE_ID.fullmatch(message_id)
    if match is not None:
        return tokens.read_message_id_token(match.group(1))
    legacy = LEGACY_MESSAGE_ID.fullmatch(message_id)
    if legacy is None:
        return None
    deliverable_id = int(legacy.group(1))
    return deliverable_id if deliverable_id <= MAX_ROW_ID else None


def _bare(message_id: str | None) -> str:
    return (message_id or "").strip().strip("<>").lower()
