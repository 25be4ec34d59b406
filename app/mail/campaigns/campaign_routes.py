"""The /campaigns routes (the state rules and SQL are in campaign_service.py)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from app.app_state import SettingsDep, app_state
from app.identity.dependencies import PaidMailUser
from app.kit.openapi import EXTENSION, FORM, JSON, request_body
from app.kit.time import utcnow
from app.mail.campaigns import (
    campaign_check,
    campaign_control_service,
    campaign_preview_service,
    campaign_report_service,
    campaign_service,
)
from app.mail.campaigns.campaign_check import SigningPolicy
from app.mail.campaigns.campaign_preview_service import mail_context_of
from app.mail.dns_records import DnsRecord
from app.mail.input import validate
from app.mail.request_input import MailInput, PagingDep, RowId
from app.mail.specs import (
    PREVIEW_PARAMETERS,
    CampaignCreate,
    CampaignPreviewQuery,
    CampaignTestSend,
    CampaignUpdate,
)
from app.mail.stats import campaign_stats
from app.mail.wire import (
    CampaignCheckFindingOut,
    CampaignCheckOut,
    CampaignOut,
    CampaignPreviewOut,
    CampaignReportOut,
    CampaignStatsOut,
    ErrorOut,
    MessageOut,
    Page,
    TestSendOut,
)
from app.request_sessions import ReadSessionDep, SessionDep

router = APIRouter(tags=["Campaigns"])

CONTROL_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}}


@router.get("/campaigns", response_model=Page[CampaignOut], summary="List campaigns")
def list_campaigns(paging: PagingDep, session: SessionDep, principal: PaidMailUser) -> Page[CampaignOut]:
    return campaign_service.campaigns_page(paging, session, principal)


@router.post(
    "/campaigns",
    openapi_extra=request_body(CampaignCreate, media_types=(JSON, FORM)),
    status_code=201,
    response_model=CampaignOut,
    summary="Create a campaign (a draft, or scheduled when scheduled_at is given)",
    responses={403: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def create_campaign(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> CampaignOut:
    body = validate(CampaignCreate, raw, status=422)
    return campaign_service.create_campaign(session, principal, body)


@router.get(
    "/campaigns/{id}",
    response_model=CampaignOut,
    summary="Get a campaign",
    responses={404: {"model": ErrorOut}},
)
def get_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> CampaignOut:
    return campaign_service.campaigns_wire(
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
def update_campaign(id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput) -> CampaignOut:
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
) -> CampaignOut:
    return campaign_service.send_draft(session, principal, id, SigningPolicy.from_settings(settings))


@router.get(
    "/campaigns/{id}/check",
    response_model=CampaignCheckOut,
    summary="Check a campaign before sending: DKIM, links, size, text part, merge tags, alt text",
    responses={404: {"model": ErrorOut}},
)
async def check_campaign(
    id: RowId, session: SessionDep, principal: PaidMailUser, settings: SettingsDep, request: Request
) -> CampaignCheckOut:
    def lint() -> tuple[list[campaign_check.Finding], list[DnsRecord]]:
        campaign = campaign_service.any_campaign(session, id, principal.account.id)
        findings = campaign_check.check_campaign(
            session, principal.account.id, campaign, SigningPolicy.from_settings(settings)
        )
        return findings, campaign_check.published_records(session, campaign.from_email)

    findings, records = await run_in_threadpool(lint)
    resolver = app_state(request).txt_resolver
    findings += await campaign_check.dns_findings(records, settings.bounce_domain, resolver)
    return CampaignCheckOut(
        findings=[CampaignCheckFindingOut.model_validate(asdict(finding)) for finding in findings],
        sendable=all(finding.severity != "error" for finding in findings),
    )


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
def pause_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> CampaignOut:
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
def resume_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> CampaignOut:
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
def cancel_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> CampaignOut:
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
def unschedule_campaign(id: RowId, session: SessionDep, principal: PaidMailUser) -> CampaignOut:
    campaign = campaign_control_service.controlled_campaign(session, principal.account.id, id)
    return campaign_control_service.unschedule_campaign(session, campaign, utcnow())


@router.get(
    "/campaigns/{id}/preview",
    response_model=CampaignPreviewOut,
    summary="Preview a campaign's email for a contact",
    description="Beyond SendFox: the subject, html and text exactly as the contact (`contact_id` or "
    "`email`; neither: a reader without names) would get them, made by the send path's renderer: merge "
    "tags and fallbacks, signed links, open pixel, unsubscribe link. Its links work but count nothing. "
    "`format=eml`: the raw message with its headers (`message/rfc822`). 404 for an unknown contact.",
    responses={
        200: {"content": {"message/rfc822": {"schema": {"type": "string"}}}},
        404: {"model": ErrorOut},
        422: {"model": ErrorOut},
    },
    openapi_extra={**EXTENSION, **PREVIEW_PARAMETERS},
)
def preview_campaign(
    id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput, settings: SettingsDep
) -> CampaignPreviewOut | Response:
    query = validate(CampaignPreviewQuery, raw, status=422)
    campaign = campaign_service.any_campaign(session, id, principal.account.id)
    recipient = campaign_preview_service.recipient_of(
        session, principal.account.id, query.contact_id, query.email
    )
    rendered = campaign_preview_service.rendered_email(
        session, campaign, recipient, mail_context_of(settings)
    )
    if query.format == "eml":
        return Response(bytes(rendered.message), media_type="message/rfc822")
    return campaign_preview_service.preview(rendered)


@router.post(
    "/campaigns/{id}/test",
    response_model=TestSendOut,
    summary="Send a test email of a campaign",
    description="Beyond SendFox: the campaign's email to 1 to 10 addresses (`emails`), `[Test] ` before "
    "its subject; an address of one of the account's contacts fills the merge tags. Counted in no "
    "statistic, checked against no suppression; its links work but count nothing. At most "
    f"{campaign_preview_service.TEST_SENDS_PER_HOUR.replace('/', ' an ')} per account (429). 503 when "
    "the relay accepted none.",
    responses={
        404: {"model": ErrorOut},
        422: {"model": ErrorOut},
        429: {"model": ErrorOut},
        503: {"model": ErrorOut},
    },
    openapi_extra={**EXTENSION, **request_body(CampaignTestSend, media_types=(JSON, FORM))},
)
async def test_send_campaign(
    id: RowId,
    request: Request,
    session: ReadSessionDep,
    principal: PaidMailUser,
    raw: MailInput,
    settings: SettingsDep,
) -> TestSendOut:
    body = validate(CampaignTestSend, raw, status=422)
    campaign = await run_in_threadpool(campaign_service.any_campaign, session, id, principal.account.id)
    emails = await run_in_threadpool(
        campaign_preview_service.test_emails,
        session,
        campaign,
        body.emails,
        mail_context_of(settings),
        app_state(request).dkim_signer,
    )
    sent = await campaign_preview_service.send_test_emails(
        app_state(request).test_send_limiter, principal.account.id, settings, emails
    )
    return TestSendOut(sent_to=sent)


@router.get(
    "/campaigns/{id}/report",
    response_model=CampaignReportOut,
    summary="A campaign's report over time",
    description="Beyond SendFox: sent, failed, first opens, first clicks, unsubscribes, bounces and "
    "complaints per hour for the first 48 hours from the start of sending (every hour listed), then per "
    "day in the account's time zone (the days that have any); its clicks per link (URL, clicks, unique "
    "clickers); and its delivery as it stands (recipients, sent, failed, cancelled, pending).",
    responses={404: {"model": ErrorOut}},
    openapi_extra=EXTENSION,
)
def campaign_report(id: RowId, session: SessionDep, principal: PaidMailUser) -> CampaignReportOut:
    campaign = campaign_service.any_campaign(session, id, principal.account.id)
    return campaign_report_service.campaign_report(session, campaign)
