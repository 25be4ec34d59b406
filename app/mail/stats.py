"""Campaign statistics and list averages, computed from deliverables (so they are right mid-send).

Rates and averages are percentages from 0 to 100 with two decimals, 0.0 while nothing was sent.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.mail.schemas import CampaignStatsOut
from app.models import Campaign, CampaignList, Deliverable


def _percent(part: int, whole: int) -> float:
    return round(part * 100.0 / whole, 2) if whole else 0.0


def campaign_stats(session: Session, campaign_ids: list[int]) -> dict[int, CampaignStatsOut]:
    """Stats for each campaign id (campaigns with no deliverables get zeros)."""
    counts = {
        row.campaign_id: row
        for row in session.execute(
            select(
                Deliverable.campaign_id,
                func.count(Deliverable.sent_at).label("sent"),
                func.count(Deliverable.opened_at).label("opened"),
                func.count(Deliverable.clicked_at).label("clicked"),
                func.count(Deliverable.unsubscribed_at).label("unsubscribed"),
                func.count(Deliverable.bounced_at).label("bounced"),
                func.count(Deliverable.spam_at).label("spam"),
            )
            .where(Deliverable.campaign_id.in_(campaign_ids))
            .group_by(Deliverable.campaign_id)
        )
    }
    result: dict[int, CampaignStatsOut] = {}
    for campaign_id in campaign_ids:
        row = counts.get(campaign_id)
        sent, opened, clicked, unsubscribed, bounced, spam = (
            (row.sent, row.opened, row.clicked, row.unsubscribed, row.bounced, row.spam) if row else (0,) * 6
        )
        result[campaign_id] = CampaignStatsOut(
            sent_count=sent,
            unique_open_count=opened,
            unique_click_count=clicked,
            unsubscribe_count=unsubscribed,
            bounce_count=bounced,
            spam_count=spam,
            open_rate=_percent(opened, sent),
            click_rate=_percent(clicked, sent),
            unsubscribe_rate=_percent(unsubscribed, sent),
            bounce_rate=_percent(bounced, sent),
            spam_rate=_percent(spam, sent),
        )
    return result


def list_averages(session: Session, list_ids: list[int]) -> dict[int, tuple[float, float]]:
    """(average open percent, average click percent) over the sent campaigns that went to each list."""
    if not list_ids:
        return {}
    per_campaign = (
        select(
            Deliverable.campaign_id,
            func.count(Deliverable.sent_at).label("sent"),
            func.count(Deliverable.opened_at).label("opened"),
            func.count(Deliverable.clicked_at).label("clicked"),
        )
        .join(CampaignList, CampaignList.campaign_id == Deliverable.campaign_id)
        .join(Campaign, Campaign.id == Deliverable.campaign_id)
        .where(CampaignList.list_id.in_(list_ids), Campaign.deleted_at.is_(None))
        .group_by(Deliverable.campaign_id)
        .having(func.count(Deliverable.sent_at) > 0)
        .subquery()
    )
    rows = session.execute(
        select(
            CampaignList.list_id,
            func.avg(per_campaign.c.opened * 100.0 / per_campaign.c.sent),
            func.avg(per_campaign.c.clicked * 100.0 / per_campaign.c.sent),
        )
        .join(per_campaign, per_campaign.c.campaign_id == CampaignList.campaign_id)
        .where(CampaignList.list_id.in_(list_ids))
        .group_by(CampaignList.list_id)
    ).all()
    return {
        list_id: (round(float(opens or 0), 2), round(float(clicks or 0), 2))
        for list_id, opens, clicks in rows
    }
