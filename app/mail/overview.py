"""The account at a glance (the console's Home): its latest campaigns with their figures (the same
`campaign_stats` as GET /campaigns/{id}/stats), how many contacts joined in the last days, and the
campaigns the automatic stop halted, with why."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.mail.stats import campaign_stats
from app.mail.wire import CampaignStatsOut
from app.models import Campaign, Contact

LATEST_CAMPAIGNS = 10
NEW_CONTACT_DAYS = 7


@dataclass(frozen=True)
class Overview:
    latest: list[tuple[Campaign, CampaignStatsOut]]
    halted: list[Campaign]
    contacts_added: int
    contacts_total: int


def account_overview(session: Session, account_id: int, contacts_total: int, now: datetime) -> Overview:
    campaigns = select(Campaign).where(
        Campaign.account_id == account_id, Campaign.deleted_at.is_(None), Campaign.automation_id.is_(None)
    )
    latest = list(session.scalars(campaigns.order_by(Campaign.id.desc()).limit(LATEST_CAMPAIGNS)))
    stats = campaign_stats(session, latest)
    halted = session.scalars(
        campaigns.where(Campaign.halted_at.is_not(None)).order_by(Campaign.halted_at.desc()).limit(50)
    )
    added = session.scalar(
        select(func.count()).where(
            Contact.account_id == account_id,
            Contact.deleted_at.is_(None),
            Contact.created_at >= now - timedelta(days=NEW_CONTACT_DAYS),
        )
    )
    return Overview(
        latest=[(campaign, stats[campaign.id]) for campaign in latest],
        halted=list(halted),
        contacts_added=added or 0,
        contacts_total=contacts_total,
    )
