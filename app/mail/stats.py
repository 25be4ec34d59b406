"""Campaign statistics, sending totals and list averages, computed from deliverables (so they are
right mid-send, whichever worker sends).

Rates and averages are percentages from 0 to 100 with two decimals, 0.0 while nothing was sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict

from sqlalchemy import and_, case, func, select
from sqlalchemy.orm import Session

from app.mail.wire import CampaignStatsOut
from app.models import Campaign, CampaignList, CampaignState, Deliverable, DeliverableState


def _percent(part: int, whole: int) -> float:
    return round(part * 100.0 / whole, 2) if whole else 0.0


class SendingWire(TypedDict):
    """The fields CampaignOut and CampaignStatsOut share about where sending stands (keyword arguments
    to either)."""

    sending_state: CampaignState
    recipients_total: int
    pending_count: int
    failed_count: int
    cancelled_count: int


@dataclass(frozen=True, slots=True)
class SendingTotals:
    """A campaign's emails by where they are (`failed` never reached the mail server's acceptance:
    a bounce reported after sending counts as sent, and as a bounce in the stats)."""

    recipients: int = 0
    pending: int = 0
    sent: int = 0
    failed: int = 0
    cancelled: int = 0

    def state(self, campaign: Campaign) -> CampaignState:
        if campaign.cancelled_at is not None:
            return CampaignState.CANCELLED
        if campaign.halted_at is not None:
            return CampaignState.HALTED
        if campaign.held_at is not None:
            return CampaignState.PAUSED
        if self.pending:
            return CampaignState.SENDING
        # A fan-out sets sent_at and queues the emails together: none queued after it means done
        # (also for a campaign that had no recipients). An automation email has deliverables only.
        if campaign.sent_at is not None or self.recipients:
            return CampaignState.SENT
        return CampaignState.QUEUED if campaign.scheduled_at is not None else CampaignState.DRAFT

    @classmethod
    def of(cls, stats: CampaignStatsOut) -> SendingTotals:
        """The totals a campaign's stats carry: a page showing both counts the campaign's emails once."""
        fields = ("recipients_total", "pending_count", "sent_count", "failed_count", "cancelled_count")
        return cls(*(getattr(stats, field) for field in fields))

    def wire(self, campaign: Campaign) -> SendingWire:
        return SendingWire(
            sending_state=self.state(campaign),
            recipients_total=self.recipients,
            pending_count=self.pending,
            failed_count=self.failed,
            cancelled_count=self.cancelled,
        )


def _totals_columns() -> list[Any]:
    refused = and_(
        Deliverable.sent_at.is_(None),
        Deliverable.state.in_((DeliverableState.FAILED, DeliverableState.BOUNCED)),
    )
    pending = Deliverable.state.in_((DeliverableState.QUEUED, DeliverableState.SENDING))
    return [
        func.count().label("recipients"),
        func.count(case((pending, 1))).label("pending"),
        func.count(Deliverable.sent_at).label("sent"),
        func.count(case((refused, 1))).label("failed"),
        func.count(case((Deliverable.state == DeliverableState.CANCELLED, 1))).label("cancelled"),
    ]


def _totals(row: Any) -> SendingTotals:
    return SendingTotals(row.recipients, row.pending, row.sent, row.failed, row.cancelled)


def sending_totals(session: Session, campaign_ids: list[int]) -> dict[int, SendingTotals]:
    """SendingTotals of each campaign id, in one query (campaigns with no deliverables get zeros)."""
    found: dict[int, SendingTotals] = {campaign_id: SendingTotals() for campaign_id in campaign_ids}
    if campaign_ids:
        query = (
            select(Deliverable.campaign_id, *_totals_columns())
            .where(Deliverable.campaign_id.in_(campaign_ids))
            .group_by(Deliverable.campaign_id)
        )
        for row in session.execute(query):
            found[row.campaign_id] = _totals(row)
    return found


def campaign_stats(session: Session, campaigns: list[Campaign]) -> dict[int, CampaignStatsOut]:
    """Stats for each campaign (campaigns with no deliverables get zeros), in one query."""
    counts = {
        row.campaign_id: row
        for row in session.execute(
            select(
                Deliverable.campaign_id,
                func.count(Deliverable.opened_at).label("opened"),
                func.count(Deliverable.clicked_at).label("clicked"),
                func.count(Deliverable.unsubscribed_at).label("unsubscribed"),
                func.count(Deliverable.bounced_at).label("bounced"),
                func.count(Deliverable.spam_at).label("spam"),
                *_totals_columns(),
            )
            .where(Deliverable.campaign_id.in_([c.id for c in campaigns]))
            .group_by(Deliverable.campaign_id)
        )
    }
    result: dict[int, CampaignStatsOut] = {}
    for campaign in campaigns:
        row = counts.get(campaign.id)
        totals = _totals(row) if row else SendingTotals()
        opened, clicked, unsubscribed, bounced, spam = (
            (row.opened, row.clicked, row.unsubscribed, row.bounced, row.spam) if row else (0,) * 5
        )
        sent = totals.sent
        result[campaign.id] = CampaignStatsOut(
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
            **totals.wire(campaign),
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


# The campaigns a deliverability report reads (the newest, when an account sent more in its window).
REPORT_CAMPAIGNS = 200


@dataclass(frozen=True, slots=True)
class DeliverabilityReport:
    """An account's campaigns of the last `days` days with their bounce and complaint rates, the rates
    over all of them, and the campaigns the automatic stop halted (with why)."""

    days: int
    campaigns: list[tuple[Campaign, CampaignStatsOut]]
    sent: int
    bounced: int
    complaints: int

    @property
    def bounce_rate(self) -> float:
        return _percent(self.bounced, self.sent)

    @property
    def complaint_rate(self) -> float:
        # Of delivered emails, as the automatic stop and the receivers count them.
        return _percent(self.complaints, self.sent - self.bounced)

    @property
    def halted(self) -> list[Campaign]:
        return [campaign for campaign, _ in self.campaigns if campaign.halted_at is not None]


def deliverability_report(
    session: Session, account_id: int, now: datetime, days: int = 30
) -> DeliverabilityReport:
    since = now - timedelta(days=days)
    campaigns = list(
        session.scalars(
            select(Campaign)
            .where(Campaign.account_id == account_id, Campaign.sent_at >= since)
            .order_by(Campaign.id.desc())
            .limit(REPORT_CAMPAIGNS)
        )
    )
    stats = campaign_stats(session, campaigns)
    rows = [(campaign, stats[campaign.id]) for campaign in campaigns]
    return DeliverabilityReport(
        days=days,
        campaigns=rows,
        sent=sum(row.sent_count for _, row in rows),
        bounced=sum(row.bounce_count for _, row in rows),
        complaints=sum(row.spam_count for _, row in rows),
    )
