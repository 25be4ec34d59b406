"""The console's Campaigns: the list with each campaign's state and figures; the editor (new, and a
campaign not sent yet) with its preview as a chosen contact beside it; a test email to yourself; send
now, schedule, pause, resume, cancel and unschedule, each asked first; the report. Every rule is the
email API's: the pages call the services its /campaigns routes call, with the API's own models, and
for the paid plans as it is."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from app.app_state import SettingsDep, app_state
from app.console import charts
from app.console.email_body import BODY_FORMATS, BodyFormat, email_html
from app.console.pages import CONSOLE, ConsoleUser, Form, PostedForm, messages_of
from app.identity.dependencies import require_paid_plan
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.kit.pagination import MAX_PAGE, PageRequest
from app.kit.time import utcnow
from app.mail.campaigns import (
    campaign_control_service,
    campaign_preview_service,
    campaign_report_service,
    campaign_service,
)
from app.mail.campaigns.campaign_check import SigningPolicy
from app.mail.common import page_of
from app.mail.field_service import counted_fields
from app.mail.input import RawInput, normalize, validate
from app.mail.list_service import account_lists
from app.mail.request_input import RowId
from app.mail.sending.render import STANDARD_FIELDS, UNSUBSCRIBE_TAG
from app.mail.specs import CampaignCreate, CampaignUpdate
from app.mail.stats import SendingTotals, campaign_stats
from app.mail.wire import CampaignOut, CampaignPreviewOut, CampaignReportOut, ReportDay, ReportHour
from app.models import Campaign, CampaignState

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
CAMPAIGNS = CONSOLE + "/campaigns"
PER_PAGE = 50
EDITED = ("title", "subject", "preheader", "from_name", "from_email", "reply_to", "text")

# What each control asks before it acts, and the states it is offered in (the service decides: a
# control offered on a page that went stale is refused with the API's 409).
QUESTIONS = {
    "send": "Send this campaign now?",
    "schedule": "Schedule this campaign?",
    "pause": "Pause this campaign?",
    "resume": "Resume sending this campaign?",
    "cancel": "Cancel this campaign for good?",
    "unschedule": "Unschedule this campaign (back to a draft)?",
}
OFFERED: dict[CampaignState, tuple[str, ...]] = {
    CampaignState.DRAFT: ("send", "schedule"),
    CampaignState.QUEUED: ("pause", "cancel", "unschedule"),
    CampaignState.SENDING: ("pause", "cancel"),
    CampaignState.PAUSED: ("resume", "cancel"),
}


def _paid(me: ConsoleUser) -> None:
    require_paid_plan(me.principal)


def _values(form: Form | None, view: CampaignOut | None) -> dict[str, Any]:
    """What the editor shows: the posted form, else the campaign, else blanks."""
    if form is not None:
        body_format = form.text("body_format")
        return {
            **{name: form.text(name) for name in EDITED},
            "body": form.get("body"),
            "body_format": body_format if body_format in BODY_FORMATS else "html",
            "lists": form.all("lists"),
            "track_opens": form.text("track_opens") == "yes",
            "preview_as": form.text("preview_as"),
        }
    return {
        **{name: (getattr(view, name) if view else None) or "" for name in EDITED},
        "body": view.html if view else "",
        "body_format": "html",
        "lists": [str(list_id) for list_id in view.lists] if view else [],
        "track_opens": view.track_opens if view else True,
        "preview_as": "",
    }


def _campaign_body(values: dict[str, Any]) -> dict[str, Any]:
    """The editor's form as the body POST /campaigns (or PATCH) would carry."""
    body_format: BodyFormat = values["body_format"]
    body: dict[str, Any] = normalize(
        {
            **{name: values[name] for name in EDITED},
            "html": email_html(values["body"], body_format) if values["body"].strip() else "",
            "lists": values["lists"],
            "track_opens": "true" if values["track_opens"] else "false",
        }
    )
    return body


def _merge_tags(me: ConsoleUser) -> list[str]:
    """The tags a campaign may use: the standard ones and the account's custom fields."""
    custom = [field.name for field in counted_fields(me.db, me.account_id)]
    return [*sorted(STANDARD_FIELDS - {UNSUBSCRIBE_TAG}), *custom, UNSUBSCRIBE_TAG]


def _preview(
    me: ConsoleUser, settings: SettingsDep, campaign: Campaign, preview_as: str
) -> CampaignPreviewOut:
    """The email as the contact with that address (none: a reader without names) would get it, made
    by the API's preview; None with the reason in the page's errors when it cannot be made."""
    recipient = campaign_preview_service.recipient_of(me.db, me.account_id, None, preview_as or None)
    rendered = campaign_preview_service.rendered_email(
        me.db, campaign, recipient, campaign_preview_service.mail_context_of(settings)
    )
    return campaign_preview_service.preview(rendered)


def _unsaved(me: ConsoleUser, campaign_id: int, values: dict[str, Any]) -> Campaign:
    """The editor's campaign as typed, not stored: what the preview renders."""
    body = _campaign_body(values)
    return Campaign(
        id=campaign_id,
        account_id=me.account_id,
        title=body.get("title") or "",
        subject=body.get("subject") or "",
        html=body.get("html") or "",
        from_name=body.get("from_name") or "",
        from_email=body.get("from_email") or "",
        text=body.get("text"),
        preheader=body.get("preheader"),
        reply_to=body.get("reply_to"),
        track_opens=values["track_opens"],
    )


def _editor_page(
    me: ConsoleUser,
    settings: SettingsDep,
    values: dict[str, Any],
    *,
    view: CampaignOut | None = None,
    preview_of: Campaign | None = None,
    errors: list[str] | None = None,
    status: int = 200,
    confirm: str = "",
    schedule_at: str = "",
    done: str = "",
) -> Response:
    errors = list(errors or [])
    preview = None
    if preview_of is not None:
        try:
            preview = _preview(me, settings, preview_of, values["preview_as"])
        except DomainError as refused:
            errors += messages_of(refused)
            status = max(status, refused.status)
        except ValueError as unreadable:  # an address the renderer cannot put in a header
            errors.append(f"The preview could not be made: {unreadable}")
            status = max(status, 400)
    state = view.sending_state if view else CampaignState.DRAFT
    return me.page(
        "campaigns/campaign.html",
        section="campaigns",
        status=status,
        values=values,
        campaign=view,
        editable=view is None or (view.sent_at is None and state != CampaignState.CANCELLED),
        lists=account_lists(me.db, me.account_id),
        merge_tags=_merge_tags(me),
        formats=BODY_FORMATS,
        preview=preview,
        controls=OFFERED.get(state, ()) if view else (),
        questions=QUESTIONS,
        confirm=confirm if confirm in QUESTIONS else "",
        schedule_at=schedule_at,
        timezone=(view.timezone if view else None) or me.account.timezone or "UTC",
        my_email=me.user.email,
        done=done,
        errors=errors,
    )


def _wire(me: ConsoleUser, campaign: Campaign) -> CampaignOut:
    return campaign_service.campaigns_wire(me.db, [campaign])[0]


def _regular(me: ConsoleUser, campaign_id: int) -> Campaign:
    """The account's campaign (not an automation's email: those are on the Automations pages); 404."""
    _paid(me)
    return campaign_service.regular_campaign(me.db, campaign_id, me.account_id)


@router.get(CAMPAIGNS)
def campaigns_page(me: ConsoleUser, page: int = 1) -> Response:
    _paid(me)
    request = PageRequest(min(max(page, 1), MAX_PAGE), PER_PAGE)
    campaigns, total = page_of(me.db, campaign_service.campaigns_query(me.account_id), request)
    stats = campaign_stats(me.db, campaigns)
    return me.page(
        "campaigns/list.html",
        section="campaigns",
        rows=[(campaign, stats[campaign.id]) for campaign in reversed(campaigns)],
        page=request.page,
        last_page=max((total + PER_PAGE - 1) // PER_PAGE, 1),
        total=total,
    )


@router.get(CAMPAIGNS + "/new")
def new_campaign_page(me: ConsoleUser, settings: SettingsDep) -> Response:
    _paid(me)
    values = _values(None, None)
    values["from_name"], values["from_email"] = me.user.name or "", me.user.email
    return _editor_page(me, settings, values)


@router.post(CAMPAIGNS + "/new")
def new_campaign_submit(me: ConsoleUser, form: PostedForm, settings: SettingsDep) -> Response:
    _paid(me)
    values = _values(form, None)
    if form.text("action") == "preview":
        return _editor_page(me, settings, values, preview_of=_unsaved(me, 0, values))
    try:
        body = validate(CampaignCreate, RawInput(_campaign_body(values)), status=422)
        made = campaign_service.create_campaign(me.db, me.principal, body)
    except DomainError as refused:
        return _editor_page(me, settings, values, errors=messages_of(refused), status=refused.status)
    return me.redirect(f"{CAMPAIGNS}/{made.id}?done=saved")


@router.get(CAMPAIGNS + "/{campaign_id}")
def campaign_page(
    campaign_id: RowId,
    me: ConsoleUser,
    settings: SettingsDep,
    confirm: str = "",
    at: str = "",
    preview_as: str = "",
    done: str = "",
) -> Response:
    campaign = _regular(me, campaign_id)
    view = _wire(me, campaign)
    values = {**_values(None, view), "preview_as": preview_as.strip()}
    return _editor_page(
        me, settings, values, view=view, preview_of=campaign, confirm=confirm, schedule_at=at, done=done
    )


@router.post(CAMPAIGNS + "/{campaign_id}")
def campaign_submit(campaign_id: RowId, me: ConsoleUser, form: PostedForm, settings: SettingsDep) -> Response:
    campaign = _regular(me, campaign_id)
    values = _values(form, None)
    if form.text("action") == "preview":
        view = _wire(me, campaign)
        return _editor_page(me, settings, values, view=view, preview_of=_unsaved(me, campaign.id, values))
    try:
        editable = campaign_service.editable_campaign(me.db, me.principal, campaign_id)
        body = validate(CampaignUpdate, RawInput(_campaign_body(values)), status=422)
        campaign_service.update_campaign(me.db, me.principal, editable, body)
    except DomainError as refused:
        if refused.status == 404:
            raise
        view = _wire(me, campaign)
        return _editor_page(
            me, settings, values, view=view, errors=messages_of(refused), status=refused.status
        )
    return me.redirect(f"{CAMPAIGNS}/{campaign_id}?done=saved")


@router.post(CAMPAIGNS + "/{campaign_id}/test")
async def test_send_submit(
    campaign_id: RowId, request: Request, me: ConsoleUser, settings: SettingsDep
) -> Response:
    """A test email of the campaign as saved, to the signed-in person's own address."""
    campaign = await run_in_threadpool(_regular, me, campaign_id)
    try:
        emails = await run_in_threadpool(
            campaign_preview_service.test_emails,
            me.db,
            campaign,
            [me.user.email],
            campaign_preview_service.mail_context_of(settings),
            app_state(request).dkim_signer,
        )
        await campaign_preview_service.send_test_emails(
            app_state(request).test_send_limiter, me.account_id, settings, emails
        )
    except DomainError as refused:
        return await run_in_threadpool(_refused_page, me, settings, campaign, refused)
    return me.redirect(f"{CAMPAIGNS}/{campaign_id}?done=tested")


def _refused_page(
    me: ConsoleUser, settings: SettingsDep, campaign: Campaign, refused: DomainError
) -> Response:
    """The campaign's page again, with the service's refusal above it (404 stays a 404)."""
    if refused.status == 404:
        raise refused
    view = _wire(me, campaign)
    return _editor_page(
        me, settings, _values(None, view), view=view, errors=messages_of(refused), status=refused.status
    )


def _control(me: ConsoleUser, settings: SettingsDep, campaign_id: int, action: str, at: str) -> None:
    """The control through the service its API route calls."""
    now = utcnow()
    if action == "send":
        campaign_service.send_draft(me.db, me.principal, campaign_id, SigningPolicy.from_settings(settings))
    elif action == "schedule":
        editable = campaign_service.editable_campaign(me.db, me.principal, campaign_id)
        body = validate(CampaignUpdate, RawInput(normalize({"scheduled_at": at})), status=422)
        if body.scheduled_at is None:
            raise DomainError(422, "Choose when to send it.")
        campaign_service.update_campaign(me.db, me.principal, editable, body)
    else:
        controls = {
            "pause": campaign_control_service.pause_campaign,
            "resume": campaign_control_service.resume_campaign,
            "cancel": campaign_control_service.cancel_campaign,
            "unschedule": campaign_control_service.unschedule_campaign,
        }
        controlled = campaign_control_service.controlled_campaign(me.db, me.account_id, campaign_id)
        controls[action](me.db, controlled, now)


@router.post(CAMPAIGNS + "/{campaign_id}/control")
def control_submit(campaign_id: RowId, me: ConsoleUser, form: PostedForm, settings: SettingsDep) -> Response:
    """Send, schedule, pause, resume, cancel or unschedule: a post without the confirmation only leads
    to the question, on the campaign's page."""
    campaign = _regular(me, campaign_id)
    action, at = form.text("action"), form.text("scheduled_at")
    here = f"{CAMPAIGNS}/{campaign_id}"
    if action not in QUESTIONS:
        raise DomainError(400, "Unknown action.")
    if form.text("confirmed") != "yes":
        query = f"?confirm={action}" + (f"&at={at}" if action == "schedule" and at else "")
        return me.redirect(here + query)
    try:
        _control(me, settings, campaign_id, action, at)
    except DomainError as refused:
        return _refused_page(me, settings, campaign, refused)
    return me.redirect(f"{here}?done={action}")


def _bucket_label(bucket: ReportHour | ReportDay) -> str:
    if isinstance(bucket, ReportHour):
        return bucket.start.strftime("%m-%d %H:00")
    return bucket.date


def _series(report: CampaignReportOut) -> list[dict[str, Any]]:
    """The report's buckets (each hour of the first 48, then each day) as rows with a label."""
    buckets: list[ReportHour | ReportDay] = [*report.hourly, *report.daily]
    return [{"label": _bucket_label(bucket), **dict(bucket)} for bucket in buckets]


@router.get(CAMPAIGNS + "/{campaign_id}/report")
def report_page(campaign_id: RowId, me: ConsoleUser) -> Response:
    campaign = _regular(me, campaign_id)
    stats = campaign_stats(me.db, [campaign])[campaign.id]
    report = campaign_report_service.campaign_report(me.db, campaign, SendingTotals.of(stats))
    rows = _series(report)
    delivery = report.delivery
    done = delivery.sent + delivery.failed + delivery.cancelled
    chart_of = {
        kind: charts.bar_chart([charts.Bar(row["label"], row[kind]) for row in rows], title=title)
        for kind, title in (
            ("sent", "Emails sent over time"),
            ("opened", "First opens over time"),
            ("clicked", "First clicks over time"),
        )
    }
    chart_of["links"] = charts.bar_chart(
        [charts.Bar(link.url, link.clicks) for link in report.links], title="Clicks per link"
    )
    return me.page(
        "campaigns/report.html",
        section="campaigns",
        campaign=campaign,
        report=report,
        stats=stats,
        rows=[row for row in rows if any(row[kind] for kind in campaign_report_service.KINDS)],
        charts=chart_of,
        progress=(done * 100 // delivery.recipients) if delivery.recipients else 0,
        sending=report.sending_state in (CampaignState.SENDING, CampaignState.QUEUED),
    )
