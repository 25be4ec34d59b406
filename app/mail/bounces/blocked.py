"""Blocked refusals (bounce_classes.py's `blocked`: the receiver refused the sender, not the address):
recorded once per email with the receiving domain, counted per campaign and domain, and the rule that
stops a campaign when one domain refuses too much of it. The address is never suppressed for it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import upsert
from app.mail.bounces.bounce_classes import enhanced_status
from app.models import BlockedRejection, Contact, Deliverable, DeliverableState

MAX_DETAIL = 500


@dataclass(frozen=True, slots=True)
class Refusal:
    deliverable_id: int
    # The receiver's words (an SMTP reply, a DSN's Diagnostic-Code, a provider's reason).
    diagnostic: str | None = None


@dataclass(frozen=True, slots=True)
class DomainCount:
    domain: str
    blocked: int
    # A status seen at that domain (the highest, 5.7.26), for the campaign's view and halt reason.
    status: str | None


def receiving_domain(email_key: str) -> str:
    return email_key.rpartition("@")[2].lower()


def record_blocked(session: Session, refusals: Sequence[Refusal], now: datetime) -> set[int]:
    """Record each refusal once (a repeated report changes nothing); the campaigns concerned."""
    diagnostics = {refusal.deliverable_id: refusal.diagnostic for refusal in refusals}
    if not diagnostics:
        return set()
    rows = session.execute(
        select(Deliverable.id, Deliverable.account_id, Deliverable.campaign_id, Contact.email_key)
        .join(Contact, Contact.id == Deliverable.contact_id)
        .where(Deliverable.id.in_(sorted(diagnostics)))
    ).all()
    if not rows:
        return set()
    values = []
    for row in rows:
        detail = (diagnostics[row.id] or "").strip()[:MAX_DETAIL] or None
        values.append(
            {
                "account_id": row.account_id,
                "campaign_id": row.campaign_id,
                "deliverable_id": row.id,
                "receiving_domain": receiving_domain(row.email_key),
                "status": enhanced_status(detail),
                "detail": detail,
                "created_at": now,
            }
        )
    session.execute(upsert(session, BlockedRejection).values(values).on_conflict_do_nothing())
    return {row.campaign_id for row in rows}


def blocked_by_domain(session: Session, campaign_ids: Iterable[int]) -> dict[int, list[DomainCount]]:
    """Per campaign, its blocked refusals per receiving domain, the most refused first."""
    ids = sorted(set(campaign_ids))
    found: dict[int, list[DomainCount]] = {campaign_id: [] for campaign_id in ids}
    if not ids:
        return found
    counts: dict[tuple[int, str], int] = {}
    statuses: dict[tuple[int, str], str | None] = {}
    for campaign_id, domain, status, blocked in session.execute(
        select(
            BlockedRejection.campaign_id,
            BlockedRejection.receiving_domain,
            func.max(BlockedRejection.status),
            func.count(),
        )
        .where(BlockedRejection.campaign_id.in_(ids))
        .group_by(BlockedRejection.campaign_id, BlockedRejection.receiving_domain)
    ):
        counts[campaign_id, domain] = blocked
        statuses[campaign_id, domain] = status
    for (campaign_id, domain), blocked in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        found[campaign_id].append(DomainCount(domain, blocked, statuses[campaign_id, domain]))
    return found


def attempted_at(session: Session, campaign_id: int, domain: str) -> int:
    """Emails of the campaign to the domain that were tried: sent, or refused at the SMTP dialogue."""
    pattern = "%@" + domain.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return int(
        session.scalar(
            select(func.count())
            .select_from(Deliverable)
            .join(Contact, Contact.id == Deliverable.contact_id)
            .where(
                Deliverable.campaign_id == campaign_id,
                Deliverable.sent_at.is_not(None)
                | Deliverable.state.in_((DeliverableState.BOUNCED, DeliverableState.FAILED)),
                Contact.email_key.like(pattern, escape="\\"),
            )
        )
        or 0
    )
