"""The campaign a watch's `email` action made (the newsletter's draft), reviewed and sent from the
console: its subject, sender, lists and html, and **Send it**, which asks to confirm on a page of its
own and then calls the service POST /campaigns/{id}/send calls (the check before send, the plan, the
lists, the warm-up), for paid plans as the email API is."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from app.app_state import SettingsDep
from app.console.pages import CONSOLE, ConsoleUser, PostedForm, messages_of
from app.identity.dependencies import require_paid_plan
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.mail.campaigns import campaign_service
from app.mail.campaigns.campaign_check import SigningPolicy
from app.mail.list_service import account_lists
from app.watches import watch_service

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
# Under its watch (the page a run of the email action links to); a route module imports no other.
DRAFT = CONSOLE + "/watches/{watch_id}/campaigns/{campaign_id}"


def _draft_page(
    me: ConsoleUser, watch_id: str, campaign_id: int, *, confirm: bool, error: DomainError | None = None
) -> Response:
    require_paid_plan(me.principal)
    watch = watch_service.read_watch(me.db, me.account_id, watch_id)
    campaign = campaign_service.any_campaign(me.db, campaign_id, me.account_id)
    view = campaign_service.campaigns_wire(me.db, [campaign])[0]
    names = {row.id: row for row in account_lists(me.db, me.account_id)}
    return me.page(
        "watches/campaign.html",
        section="watches",
        status=error.status if error else 200,
        watch=watch,
        campaign=view,
        lists=[names[list_id] for list_id in view.lists if list_id in names],
        is_draft=view.sent_at is None and view.scheduled_at is None,
        confirm=confirm,
        errors=messages_of(error) if error else [],
    )


@router.get(DRAFT)
def draft_page(watch_id: str, campaign_id: int, me: ConsoleUser, confirm: str = "") -> Response:
    return _draft_page(me, watch_id, campaign_id, confirm=confirm == "1")


@router.post(DRAFT + "/send")
def send_draft_submit(
    watch_id: str, campaign_id: int, me: ConsoleUser, form: PostedForm, settings: SettingsDep
) -> Response:
    here = DRAFT.format(watch_id=watch_id, campaign_id=campaign_id)
    if form.text("confirmed") != "yes":
        return me.redirect(here + "?confirm=1")
    require_paid_plan(me.principal)
    try:
        campaign_service.send_draft(me.db, me.principal, campaign_id, SigningPolicy.from_settings(settings))
    except DomainError as refused:
        if refused.status == 404:
            raise
        return _draft_page(me, watch_id, campaign_id, confirm=False, error=refused)
    return me.redirect(here)
