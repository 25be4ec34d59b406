"""The /campaigns routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import select

from app.db import SessionDep
from app.identity.dependencies import PaidMailUser
from app.kit.errors import Conflict, DomainError, ValidationFailed
from app.kit.time import utcnow
from app.mail.campaign_rules import (
    check_can_send,
    live_list_ids,
    to_utc,
)
from app.mail.campaign_service import (
    CAMPAIGNS_PER_PAGE,
    REQUIRED_ON_UPDATE,
    any_campaign,
    campaign_views,
    regular_campaign,
    reject_if_sent,
    schedule_checks,
    set_campaign_lists,
)
from app.mail.common import RowId, check_list_ids, paginate
from app.mail.input import MailInput, validate
from app.mail.schemas import CampaignOut, CampaignStatsOut, ErrorOut, MessageOut, Page
from app.mail.specs import CampaignCreate, CampaignUpdate
from app.mail.stats import campaign_stats
from app.models import Campaign

router = APIRouter(tags=["Campaigns"])


@router.get("/campaigns", response_model=Page[CampaignOut], summary="List campaigns")
def list_campaigns(request: Request, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    query = (
        select(Campaign)
        .where(
            Campaign.account_id == principal.account.id,
            Campaign.deleted_at.is_(None),
            Campaign.automation_id.is_(None),
        )
        .order_by(Campaign.id)
    )
    paged = paginate(session, request, query, CAMPAIGNS_PER_PAGE)
    return paged.envelope(campaign_views(session, paged.rows))


@router.post(
    "/campaigns",
    status_code=201,
    response_model=CampaignOut,
    summary="Create a campaign (a draft, or scheduled when scheduled_at is given)",
    responses={403: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def create_campaign(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> dict[str, Any]:
    body = validate(CampaignCreate, raw, status=422)
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
    session.add(campaign)
    session.flush()
    set_campaign_lists(session, campaign.id, list_ids)
    session.flush()
    return campaign_views(session, [campaign])[0]


@router.get(
    "/campaigns/{id}",
    response_model=CampaignOut,
    summary="Get a campaign",
    responses={404: {"model": ErrorOut}},
)
def get_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    return campaign_views(session, [any_campaign(session, id, principal.account.id)])[0]


@router.patch(
    "/campaigns/{id}",
    response_model=CampaignOut,
    summary="Edit a campaign that has not been sent",
    responses={
        403: {"model": ErrorOut},
        404: {"model": ErrorOut},
        409: {"model": ErrorOut},
        422: {"model": ErrorOut},
    },
)
def update_campaign(
    id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> dict[str, Any]:
    campaign = regular_campaign(session, id, principal.account.id, for_update=True)
    reject_if_sent(campaign)
    body = validate(CampaignUpdate, raw, status=422)
    given = body.model_fields_set
    nulled = [name for name in REQUIRED_ON_UPDATE if name in given and getattr(body, name) is None]
    if nulled:
        raise ValidationFailed(
            {name: [f"The {name.replace('_', ' ')} field is required."] for name in nulled}
        )
    for name in REQUIRED_ON_UPDATE:
        if name in given:
            setattr(campaign, name, getattr(body, name))
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
    return campaign_views(session, [campaign])[0]


@router.delete(
    "/campaigns/{id}",
    response_model=MessageOut,
    summary="Delete a campaign that has not been sent",
    responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}},
)
def delete_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    campaign = regular_campaign(session, id, principal.account.id, for_update=True)
    reject_if_sent(campaign)
    campaign.deleted_at = utcnow()
    session.flush()
    return MessageOut(message="Campaign deleted.")


@router.post(
    "/campaigns/{id}/send",
    response_model=CampaignOut,
    summary="Send a draft campaign now",
    responses={
        400: {"model": ErrorOut},
        403: {"model": ErrorOut},
        404: {"model": ErrorOut},
        409: {"model": ErrorOut},
    },
)
def send_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    campaign = regular_campaign(session, id, principal.account.id, for_update=True)
    reject_if_sent(campaign)
    if campaign.scheduled_at is not None:
        raise Conflict("Campaign is already scheduled.", code="already_scheduled")
    if not live_list_ids(session, campaign.id):
        raise DomainError(400, "The campaign has no lists: assign at least one list before sending.")
    check_can_send(principal.account)
    campaign.scheduled_at = utcnow()
    campaign.updated_at = campaign.scheduled_at
    session.flush()
    return campaign_views(session, [campaign])[0]


@router.get(
    "/campaigns/{id}/stats",
    response_model=CampaignStatsOut,
    summary="A campaign's delivery statistics (rates in percent)",
    responses={404: {"model": ErrorOut}},
)
def get_campaign_stats(id: RowId, session: SessionDep, principal: PaidMailUser) -> CampaignStatsOut:
    campaign = any_campaign(session, id, principal.account.id)
    return campaign_stats(session, [campaign])[campaign.id]
