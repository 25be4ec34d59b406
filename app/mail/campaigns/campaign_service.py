"""Campaigns: the /campaigns routes and the state rules of SendFox's API (draft, scheduled, sent, deleted).

A campaign has no status column: scheduled_at, sent_at and deleted_at say where it is. Once a worker
has set sent_at, PATCH, DELETE and send answer 409 (so they do for a campaign its sender cancelled). A
scheduled campaign that has not started sending may still be edited, unscheduled (scheduled_at null) or
deleted. Pause, resume, cancel and unschedule are campaign_control_service.py.
"""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import Select, delete, select
from sqlalchemy.orm import Session

from app.identity.principal import Principal
from app.kit.errors import Conflict, DomainError, NotFound, ValidationFailed
from app.kit.pagination import Paging
from app.kit.time import utcnow
from app.mail.campaigns.campaign_check import SigningPolicy, refuse_serious_findings
from app.mail.campaigns.campaign_rules import (
    check_can_send,
    check_timezone_configured,
    live_list_ids,
    set_email_parts,
    to_utc,
)
from app.mail.common import check_list_ids, paginate
from app.mail.specs import CampaignCreate, CampaignUpdate
from app.mail.stats import sending_totals
from app.mail.wire import CampaignOut, Page, row_wire
from app.models import Campaign, CampaignList, ContactList

CAMPAIGNS_PER_PAGE = 100


REQUIRED_ON_UPDATE = ("title", "subject", "html", "from_name", "from_email")


def campaigns_wire(session: Session, campaigns: list[Campaign]) -> list[CampaignOut]:
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
        row_wire(CampaignOut, c, lists=lists_of[c.id], sent_count=totals[c.id].sent, **totals[c.id].wire(c))
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


def reject_if_cancelled(campaign: Campaign) -> None:
    if campaign.cancelled_at is not None:
        raise Conflict("Campaign was cancelled.", code="cancelled")


def campaigns_query(account_id: int) -> Select[Campaign]:
    """The account's live campaigns (not an automation's emails), oldest first: what GET /campaigns
    pages, and the console's list."""
    return (
        select(Campaign)
        .where(
            Campaign.account_id == account_id,
            Campaign.deleted_at.is_(None),
            Campaign.automation_id.is_(None),
        )
        .order_by(Campaign.id)
    )


def campaigns_page(paging: Paging, session: Session, principal: Principal) -> Page[CampaignOut]:
    """GET /campaigns: a page of the account's live campaigns (not an automation's emails)."""
    paged = paginate(session, paging, campaigns_query(principal.account.id), CAMPAIGNS_PER_PAGE)
    return paged.as_page(campaigns_wire(session, paged.rows))


def create_campaign(session: Session, principal: Principal, body: CampaignCreate) -> CampaignOut:
    """POST /campaigns: a draft, or scheduled when scheduled_at is given."""
    list_ids = check_list_ids(session, principal.account.id, body.lists, "lists", 422)
    timezone = body.timezone or principal.account.timezone or None
    scheduled_at = None
    if body.scheduled_at is not None:
        timezone = schedule_checks(principal, list_ids, timezone)
        scheduled_at = to_utc(body.scheduled_at, timezone)
    campaign = Campaign(
        account_id=principal.account.id,
        title=body.title,
        subject=body.subject,
        html=body.html,
        from_name=body.from_name,
        from_email=body.from_email,
        timezone=timezone,
        scheduled_at=scheduled_at,
    )
    set_email_parts(campaign, body)
    campaign.public_archive = body.public_archive
    session.add(campaign)
    session.flush()
    set_campaign_lists(session, campaign.id, list_ids)
    session.flush()
    return campaigns_wire(session, [campaign])[0]


def update_campaign(
    session: Session, principal: Principal, campaign: Campaign, body: CampaignUpdate
) -> CampaignOut:
    """PATCH /campaigns/{id} of a campaign not sent: given fields replace, null ones that are required
    are refused, and a schedule is checked as at creation."""
    given = body.model_fields_set
    nulled = [name for name in REQUIRED_ON_UPDATE if name in given and getattr(body, name) is None]
    if nulled:
        raise ValidationFailed(
            {name: [f"The {name.replace('_', ' ')} field is required."] for name in nulled}
        )
    for name in REQUIRED_ON_UPDATE:
        if name in given:
            setattr(campaign, name, getattr(body, name))
    set_email_parts(campaign, body)
    if body.public_archive is not None:
        campaign.public_archive = body.public_archive
    if body.timezone is not None:
        campaign.timezone = body.timezone
    if body.lists is not None:
        list_ids = check_list_ids(session, principal.account.id, body.lists, "lists", 422)
        set_campaign_lists(session, campaign.id, list_ids)
        session.flush()
    if "scheduled_at" in given:
        if body.scheduled_at is None:
            campaign.scheduled_at = None
        else:
            # A draft made while the account had no time zone takes the account's once it has one.
            timezone = schedule_checks(
                principal,
                live_list_ids(session, campaign.id),
                campaign.timezone or principal.account.timezone or None,
            )
            campaign.timezone = timezone
            campaign.scheduled_at = to_utc(body.scheduled_at, timezone)
    elif (
        campaign.scheduled_at is not None
        and body.lists is not None
        and not live_list_ids(session, campaign.id)
    ):
        raise ValidationFailed({"lists": ["A scheduled campaign needs at least one list."]})
    campaign.updated_at = utcnow()
    session.flush()
    return campaigns_wire(session, [campaign])[0]


def delete_campaign(session: Session, campaign: Campaign) -> None:
    campaign.deleted_at = utcnow()
    session.flush()


def send_campaign(session: Session, principal: Principal, campaign: Campaign) -> CampaignOut:
    """POST /campaigns/{id}/send of a draft: scheduled now, when it has lists and the account may send."""
    if campaign.scheduled_at is not None:
        raise Conflict("Campaign is already scheduled.", code="already_scheduled")
    if not live_list_ids(session, campaign.id):
        raise DomainError(400, "The campaign has no lists: assign at least one list before sending.")
    check_can_send(principal.account)
    campaign.scheduled_at = utcnow()
    campaign.updated_at = campaign.scheduled_at
    session.flush()
    return campaigns_wire(session, [campaign])[0]


def send_draft(
    session: Session, principal: Principal, campaign_id: int, policy: SigningPolicy
) -> CampaignOut:
    """POST /campaigns/{id}/send (and the console's Send): the account's unsent campaign, refused on a
    serious finding of the check before send, then sent as `send_campaign` does."""
    campaign = editable_campaign(session, principal, campaign_id)
    refuse_serious_findings(session, principal.account.id, campaign, policy)
    return send_campaign(session, principal, campaign)


def editable_campaign(session: Session, principal: Principal, campaign_id: int) -> Campaign:
    """A campaign of the account that has not been sent, locked for the change (404, 409 otherwise)."""
    campaign = regular_campaign(session, campaign_id, principal.account.id, for_update=True)
    reject_if_sent(campaign)
    reject_if_cancelled(campaign)
    return campaign
