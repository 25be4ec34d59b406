"""The /campaigns routes (the state rules and SQL are in campaign_service.py)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request

from app.db import SessionDep
from app.identity.dependencies import PaidMailUser
from app.kit.openapi import FORM, JSON, request_body
from app.mail import campaign_check, campaign_service
from app.mail.campaign_check import SigningPolicy
from app.mail.common import RowId
from app.mail.input import MailInput, validate
from app.mail.schemas import CampaignCheckOut, CampaignOut, CampaignStatsOut, ErrorOut, MessageOut, Page
from app.mail.specs import CampaignCreate, CampaignUpdate
from app.mail.stats import campaign_stats
from app.state import SettingsDep

router = APIRouter(tags=["Campaigns"])


@router.get("/campaigns", response_model=Page[CampaignOut], summary="List campaigns")
def list_campaigns(request: Request, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    return campaign_service.campaigns_page(request, session, principal)


@router.post(
    "/campaigns",
    openapi_extra=request_body(CampaignCreate, media_types=(JSON, FORM)),
    status_code=201,
    response_model=CampaignOut,
    summary="Create a campaign (a draft, or scheduled when scheduled_at is given)",
    responses={403: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def create_campaign(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> dict[str, Any]:
    body = validate(CampaignCreate, raw, status=422)
    return campaign_service.create_campaign(session, principal, body)


@router.get(
    "/campaigns/{id}",
    response_model=CampaignOut,
    summary="Get a campaign",
    responses={404: {"model": ErrorOut}},
)
def get_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    return campaign_service.campaign_views(
        session, [campaign_service.any_campaign(session, id, principal.account.id)]
    )[0]


@router.patch(
    "/campaigns/{id}",
    openapi_extra=request_body(CampaignUpdate, media_types=(JSON, FORM)),
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
    campaign = campaign_service.editable_campaign(session, principal, id)
    body = validate(CampaignUpdate, raw, status=422)
    return campaign_service.update_campaign(session, principal, campaign, body)


@router.delete(
    "/campaigns/{id}",
    response_model=MessageOut,
    summary="Delete a campaign that has not been sent",
    responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}},
)
def delete_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    campaign = campaign_service.editable_campaign(session, principal, id)
    campaign_service.delete_campaign(session, campaign)
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
def send_campaign(
    id: RowId, session: SessionDep, principal: PaidMailUser, settings: SettingsDep
) -> dict[str, Any]:
    return campaign_service.send_draft(session, principal, id, SigningPolicy.from_settings(settings))


@router.get(
    "/campaigns/{id}/check",
    response_model=CampaignCheckOut,
    summary="Check a campaign before sending: DKIM, links, size, text part, merge tags, alt text",
    responses={404: {"model": ErrorOut}},
)
def check_campaign(
    id: RowId, session: SessionDep, principal: PaidMailUser, settings: SettingsDep
) -> dict[str, Any]:
    campaign = campaign_service.any_campaign(session, id, principal.account.id)
    findings = campaign_check.check_campaign(
        session, principal.account.id, campaign, SigningPolicy.from_settings(settings)
    )
    return {
        "findings": [asdict(finding) for finding in findings],
        "sendable": all(finding.severity != "error" for finding in findings),
    }


@router.get(
    "/campaigns/{id}/stats",
    response_model=CampaignStatsOut,
    summary="A campaign's delivery statistics (rates in percent)",
    responses={404: {"model": ErrorOut}},
)
def get_campaign_stats(id: RowId, session: SessionDep, principal: PaidMailUser) -> CampaignStatsOut:
    campaign = campaign_service.any_campaign(session, id, principal.account.id)
    return campaign_stats(session, [campaign])[campaign.id]
