"""Pause, resume, cancel and unschedule: a sender's controls over a campaign (an automation's email too).

A campaign has no state column: `held_at` set means no email of it may start (paused, or cancelled);
`cancelled_at` set means cancelled, for good. The send claim skips held campaigns, a worker does not
start an email of one it had already claimed (app/mail/sending/holds.py), and the fan-out leaves a held
scheduled campaign alone. Nothing is re-queued on resume: the emails not sent are still `queued` rows
(those a worker put back included), so a resume sends exactly those, each once.

Each control locks the campaign row (as the fan-out does), so it and a worker starting the campaign
take turns. The transitions, 409 otherwise: pause a scheduled or sending campaign (an automation's
email unless paused or cancelled); resume a paused one; cancel a scheduled, sending or paused one (an
automation's email unless cancelled); unschedule a scheduled campaign that has not started.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.kit.errors import Conflict, NotFound
from app.mail.campaigns.campaign_service import campaigns_wire, reject_if_cancelled, reject_if_sent
from app.mail.events.emit import emit_campaign_event
from app.mail.events.types import EventType
from app.mail.stats import sending_totals
from app.mail.wire import CampaignOut
from app.models import Campaign, CampaignState, Deliverable, DeliverableState

CANCELLED_BY_SENDER = "cancelled by its sender"

PAUSABLE = (CampaignState.QUEUED, CampaignState.SENDING)
CANCELLABLE = (CampaignState.QUEUED, CampaignState.SENDING, CampaignState.PAUSED)
# An automation's email sends as contacts reach it, for as long as the automation runs: it can be
# paused or cancelled whether or not it has emails waiting.
AUTOMATION_PAUSABLE = (CampaignState.DRAFT, CampaignState.SENDING, CampaignState.SENT)
AUTOMATION_CANCELLABLE = (*AUTOMATION_PAUSABLE, CampaignState.PAUSED)


def controlled_campaign(session: Session, account_id: int, campaign_id: int) -> Campaign:
    """A live campaign of the account (an automation's email too), locked for the change (404)."""
    campaign = session.get(Campaign, campaign_id, with_for_update=True)
    if campaign is None or campaign.account_id != account_id or campaign.deleted_at is not None:
        raise NotFound("Campaign not found.")
    return campaign


def _state(session: Session, campaign: Campaign) -> CampaignState:
    return sending_totals(session, [campaign.id])[campaign.id].state(campaign)


def _check(
    session: Session,
    campaign: Campaign,
    regular: tuple[CampaignState, ...],
    automation: tuple[CampaignState, ...],
    verb: str,
) -> None:
    state = _state(session, campaign)
    allowed = automation if campaign.automation_id is not None else regular
    if state not in allowed:
        raise Conflict(f"A {state} campaign cannot be {verb}.", code=f"not_{verb}")


def _told(session: Session, campaign: Campaign, event_type: EventType, now: datetime) -> CampaignOut:
    """The campaign as the answer shows it, told to the account's webhooks as `event_type`."""
    view = campaigns_wire(session, [campaign])[0]
    data = {
        "campaign": {
            "id": campaign.id,
            "title": campaign.title,
            "sending_state": view.sending_state,
            "pending_count": view.pending_count,
            "cancelled_count": view.cancelled_count,
        }
    }
    emit_campaign_event(session, campaign.account_id, event_type, data, now)
    return view


def pause_campaign(session: Session, campaign: Campaign, now: datetime) -> CampaignOut:
    """POST /campaigns/{id}/pause: no email of it starts once this commits; the queued ones wait."""
    _check(session, campaign, PAUSABLE, AUTOMATION_PAUSABLE, "paused")
    campaign.held_at = now
    campaign.updated_at = now
    session.flush()
    return _told(session, campaign, EventType.CAMPAIGN_PAUSED, now)


def resume_campaign(session: Session, campaign: Campaign, now: datetime) -> CampaignOut:
    """POST /campaigns/{id}/resume: its queued emails are claimed again (a scheduled one starts when due)."""
    if campaign.held_at is None or campaign.cancelled_at is not None:
        raise Conflict(
            f"A {_state(session, campaign)} campaign cannot be resumed: only a paused one.", code="not_paused"
        )
    campaign.held_at = None
    campaign.updated_at = now
    session.flush()
    return _told(session, campaign, EventType.CAMPAIGN_RESUMED, now)


def cancel_campaign(session: Session, campaign: Campaign, now: datetime) -> CampaignOut:
    """POST /campaigns/{id}/cancel: held for good, and its queued emails cancelled. Emails on the wire
    at that moment finish and are recorded as what they became."""
    _check(session, campaign, CANCELLABLE, AUTOMATION_CANCELLABLE, "cancelled")
    campaign.held_at = campaign.held_at or now
    campaign.cancelled_at = now
    campaign.updated_at = now
    session.flush()
    _cancel_queued(session, [campaign.id], now)
    return _told(session, campaign, EventType.CAMPAIGN_CANCELLED, now)


def unschedule_campaign(session: Session, campaign: Campaign, now: datetime) -> CampaignOut:
    """POST /campaigns/{id}/unschedule: a scheduled campaign that has not started goes back to draft
    (and is no longer paused, if it was)."""
    if campaign.automation_id is not None:
        raise NotFound("Campaign not found.")
    reject_if_cancelled(campaign)
    reject_if_sent(campaign)
    if campaign.scheduled_at is None:
        raise Conflict("Campaign is not scheduled.", code="not_scheduled")
    campaign.scheduled_at = None
    campaign.held_at = None
    campaign.updated_at = now
    session.flush()
    return campaigns_wire(session, [campaign])[0]


def _cancel_queued(session: Session, campaign_ids: list[int], now: datetime) -> int:
    # Waits for a claim holding some of these rows to commit, then skips the ones it took (`sending`).
    result = session.execute(
        update(Deliverable)
        .where(Deliverable.campaign_id.in_(campaign_ids), Deliverable.state == DeliverableState.QUEUED)
        .values(state=DeliverableState.CANCELLED, error=CANCELLED_BY_SENDER, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def cancel_returned(session: Session, now: datetime) -> int:
    """Emails of cancelled campaigns that came back to the queue after the cancel (an SMTP 4xx retry, a
    lease that ran out) are cancelled too; how many. The send lease sweep runs it."""
    cancelled = list(
        session.scalars(
            select(Campaign.id).where(Campaign.held_at.is_not(None), Campaign.cancelled_at.is_not(None))
        )
    )
    return _cancel_queued(session, cancelled, now) if cancelled else 0
