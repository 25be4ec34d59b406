"""Campaigns: the /campaigns routes and the state rules of the seed (draft, scheduled, sent, deleted).

A campaign has no status column: scheduled_at, sent_at and deleted_at say where it is. Once a worker
has set sent_at, PATCH, DELETE and send answer 409. A scheduled campaign that has not started sending
may still be edited, unscheduled (scheduled_at null) or deleted.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.identity.principal import Principal
from app.kit.errors import Conflict, NotFound, ValidationFailed
from app.mail.campaign_rules import (
    check_can_send,
    check_timezone_configured,
)
from app.mail.stats import sending_totals
from app.models import Campaign, CampaignList, ContactList

CAMPAIGNS_PER_PAGE = 100


REQUIRED_ON_UPDATE = ("title", "subject", "html", "from_name", "from_email")


def campaign_views(session: Session, campaigns: list[Campaign]) -> list[dict[str, Any]]:
    """Campaigns with their list ids and sending totals, in two queries for the lot."""
    lists_of: dict[int, list[int]] = defaultdict(list)
    ids = [c.id for c in campaigns]
    totals = sending_totals(session, ids)
    if ids:
        rows = session.execute(
            select(CampaignList.campaign_id, CampaignList.list_id)
            .join(ContactList, ContactList.id == CampaignList.list_id)
            .where(CampaignList.campaign_id.in_(ids), ContactList.deleted_at.is_(None))
            .order_by(CampaignList.list_id)
        ).all()
        for campaign_id, list_id in rows:
            lists_of[campaign_id].append(list_id)
    return [
        {
            "id": c.id,
            "title": c.title,
            "subject": c.subject,
            "html": c.html,
            "from_name": c.from_name,
            "from_email": c.from_email,
            "scheduled_at": c.scheduled_at,
            "sent_at": c.sent_at,
            "timezone": c.timezone,
            "lists": lists_of[c.id],
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "sent_count": totals[c.id].sent,
            **totals[c.id].wire(c),
        }
        for c in campaigns
    ]


def set_campaign_lists(session: Session, campaign_id: int, list_ids: list[int]) -> None:
    session.execute(delete(CampaignList).where(CampaignList.campaign_id == campaign_id))
    for list_id in list_ids:
        session.add(CampaignList(campaign_id=campaign_id, list_id=list_id))


def regular_campaign(
    session: Session, campaign_id: int, account_id: int, *, for_update: bool = False
) -> Campaign:
    """A live campaign of the account that is not an automation email (those are edited elsewhere).

    Writes lock the row: a worker starting to send it (which sets sent_at under the same lock) either
    finished before, and the write sees sent_at and answers 409, or waits until the write is done.
    """
    campaign = session.get(Campaign, campaign_id, with_for_update=for_update)
    if (
        campaign is None
        or campaign.account_id != account_id
        or campaign.deleted_at is not None
        or campaign.automation_id is not None
    ):
        raise NotFound("Campaign not found.")
    return campaign


def any_campaign(session: Session, campaign_id: int, account_id: int) -> Campaign:
    campaign = session.get(Campaign, campaign_id)
    if campaign is None or campaign.account_id != account_id or campaign.deleted_at is not None:
        raise NotFound("Campaign not found.")
    return campaign


def schedule_checks(principal: Principal, list_ids: list[int], timezone: str | None) -> str:
    """What scheduling needs: a list (422), a time zone (422), an account out of warm-up (403)."""
    if not list_ids:
        raise ValidationFailed({"lists": ["At least one list is required to schedule a campaign."]})
    timezone = check_timezone_configured(timezone)
    check_can_send(principal.account)
    return timezone


def reject_if_sent(campaign: Campaign) -> None:
    if campaign.sent_at is not None:
        raise Conflict("Campaign has already been sent.", code="already_sent")
