"""The moment a campaign finished: sent once, halted, or with every email settled (sent, failed,
cancelled); stamped once in `campaigns.finished_at`, and told as a `campaign.sent` event."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import exists, or_, select, update
from sqlalchemy.orm import Session

from app.mail.events.emit import emit_campaign_event
from app.mail.events.types import EventType
from app.models import Campaign, Deliverable, DeliverableState

# Campaigns looked at per round (a round runs again at once while it finds some).
BATCH = 100


def finish_campaigns(session: Session, now: datetime) -> int:
    """Stamp the campaigns that finished since the last round; how many."""
    unsettled = exists().where(
        Deliverable.campaign_id == Campaign.id,
        Deliverable.state.in_((DeliverableState.QUEUED, DeliverableState.SENDING)),
    )
    rows = session.execute(
        select(Campaign.id, Campaign.account_id, Campaign.title, Campaign.halted_at, Campaign.halt_reason)
        .where(
            Campaign.finished_at.is_(None),
            # An automation's email is sent contact by contact for as long as the automation runs.
            Campaign.automation_id.is_(None),
            # A campaign its sender cancelled was told as `campaign.cancelled`, and never finishes.
            Campaign.cancelled_at.is_(None),
            or_(Campaign.sent_at.is_not(None), Campaign.halted_at.is_not(None)),
            or_(Campaign.halted_at.is_not(None), ~unsettled),
        )
        .order_by(Campaign.id)
        .limit(BATCH)
        .with_for_update(of=Campaign, skip_locked=True)
    ).all()
    if not rows:
        return 0
    session.execute(
        update(Campaign)
        .where(Campaign.id.in_([row.id for row in rows]), Campaign.finished_at.is_(None))
        .values(finished_at=now)
        .execution_options(synchronize_session=False)
    )
    for row in rows:
        halted = row.halted_at is not None
        data = {
            "campaign": {
                "id": row.id,
                "title": row.title,
                "sending_state": "halted" if halted else "sent",
                "halt_reason": row.halt_reason if halted else None,
            }
        }
        emit_campaign_event(session, row.account_id, EventType.CAMPAIGN_SENT, data, now)
    return len(rows)
