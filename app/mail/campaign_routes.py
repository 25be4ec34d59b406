"""The /campaigns routes (the state rules and SQL are in campaign_service.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.db import SessionDep
from app.identity.dependencies import PaidMailUser
from app.kit.openapi import FORM, JSON, request_body
from app.kit.time import utcnow
from app.mail import campaign_control_service, campaign_service
from app.mail.common import RowId
from app.mail.input import MailInput, validate
from app.mail.schemas import CampaignOut, CampaignStatsOut, ErrorOut, MessageOut, Page
from app.mail.specs import CampaignCreate, CampaignUpdate
from app.mail.stats import campaign_stats

router = APIRouter(tags=["Campaigns"])

# The routes SendFox's API does not have are marked so in the OpenAPI document.
EXTENSION: dict[str, Any] = {"x-tidings-extension": True}
CONTROL_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}}


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
def send_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    campaign = campaign_service.editable_campaign(session, principal, id)
    return campaign_service.send_campaign(session, principal, campaign)


@router.get(
    "/campaigns/{id}/stats",
    response_model=CampaignStatsOut,
    summary="A campaign's delivery statistics (rates in percent)",
    responses={404: {"model": ErrorOut}},
)
def get_campaign_stats(id: RowId, session: SessionDep, principal: PaidMailUser) -> CampaignStatsOut:
    campaign = campaign_service.any_campaign(session, id, principal.account.id)
    return campaign_stats(session, [campaign])[campaign.id]


@router.post(
    "/campaigns/{id}/pause",
    response_model=CampaignOut,
    summary="Pause a campaign",
    description="Beyond SendFox: no email of the campaign starts once the pause is made (emails already "
    "handed to the mail server finish and are recorded); the rest wait for `resume`. A scheduled "
    "campaign that has not started, and an automation's email (by its campaign id), pause the same way. "
    "409 unless it is scheduled or sending (an automation's email: unless paused or cancelled).",
    responses=CONTROL_ERRORS,
    openapi_extra=EXTENSION,
)
def pause_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    campaign = campaign_control_service.controlled_campaign(session, principal.account.id, id)
    return campaign_control_service.pause_campaign(session, campaign, utcnow())


@router.post(
    "/campaigns/{id}/resume",
    response_model=CampaignOut,
    summary="Resume a paused campaign",
    description="Beyond SendFox: sending goes on with exactly the emails not yet sent, each once. 409 "
    "unless it is paused.",
    responses=CONTROL_ERRORS,
    openapi_extra=EXTENSION,
)
def resume_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    campaign = campaign_control_service.controlled_campaign(session, principal.account.id, id)
    return campaign_control_service.resume_campaign(session, campaign, utcnow())


@router.post(
    "/campaigns/{id}/cancel",
    response_model=CampaignOut,
    summary="Cancel a campaign for good",
    description="Beyond SendFox: no email of the campaign starts once the cancel is made; the emails not "
    "sent are counted in `cancelled_count`. 409 unless it is scheduled, sending or paused (an "
    "automation's email: unless cancelled).",
    responses=CONTROL_ERRORS,
    openapi_extra=EXTENSION,
)
def cancel_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    campaign = campaign_control_service.controlled_campaign(session, principal.account.id, id)
    return campaign_control_service.cancel_campaign(session, campaign, utcnow())


@router.post(
    "/campaigns/{id}/unschedule",
    response_model=CampaignOut,
    summary="Unschedule a campaign back to draft",
    description="Beyond SendFox: a scheduled campaign that has not started becomes a draft again (no "
    "longer paused, if it was). 409 unless it is scheduled and not started.",
    responses=CONTROL_ERRORS,
    openapi_extra=EXTENSION,
)
def unschedule_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    campaign = campaign_control_service.controlled_campaign(session, principal.account.id, id)
    return campaign_control_service.unschedule_campaign(session, campaign, utcnow())
