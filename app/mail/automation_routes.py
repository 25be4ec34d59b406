"""The /automations and /automation-emails routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import func, select, update

from app.db import SessionDep
from app.identity.dependencies import PaidMailUser
from app.kit.errors import ValidationFailed
from app.kit.time import utcnow
from app.mail.automation_runs import set_active
from app.mail.automation_service import (
    AUTOMATIONS_PER_PAGE,
    DEFAULT_DELAY_HOURS,
    automation_views,
    cancel_automation_sends,
    item_views,
    owned_item,
    renumber,
    replace_trigger,
    resolve_trigger,
)
from app.mail.common import RowId, owned, paginate
from app.mail.input import MailInput, validate
from app.mail.schemas import AutomationItemOut, AutomationOut, ErrorOut, MessageOut, Page
from app.mail.specs import AutomationCreate, AutomationEmailCreate, AutomationEmailUpdate, AutomationUpdate
from app.models import Automation, AutomationItem, AutomationTrigger, Campaign

router = APIRouter(tags=["Automations"])


@router.get("/automations", response_model=Page[AutomationOut], summary="List automations")
def list_automations(request: Request, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    query = (
        select(Automation)
        .where(Automation.account_id == principal.account.id, Automation.deleted_at.is_(None))
        .order_by(Automation.id)
    )
    paged = paginate(session, request, query, AUTOMATIONS_PER_PAGE)
    return paged.envelope(automation_views(session, paged.rows, with_stats=False))


@router.post(
    "/automations",
    status_code=201,
    response_model=AutomationOut,
    summary="Create an automation",
    responses={403: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def create_automation(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> dict[str, Any]:
    body = validate(AutomationCreate, raw, status=422)
    trigger = resolve_trigger(
        session, principal, body.trigger_type, body.trigger_list_id, body.trigger_campaign_id
    )
    automation = Automation(
        account_id=principal.account.id, user_id=principal.user.id, title=body.title, active=body.active
    )
    session.add(automation)
    session.flush()
    if trigger is not None:
        replace_trigger(session, automation, trigger)
        session.flush()
    return automation_views(session, [automation], with_stats=False)[0]


@router.get(
    "/automations/{id}",
    response_model=AutomationOut,
    summary="Get an automation with its triggers, emails and their stats",
    responses={404: {"model": ErrorOut}},
)
def get_automation(id: RowId, session: SessionDep, principal: PaidMailUser) -> dict[str, Any]:
    automation = owned(session, Automation, id, principal.account.id, "Automation not found.")
    return automation_views(session, [automation], with_stats=True)[0]


@router.patch(
    "/automations/{id}",
    response_model=AutomationOut,
    summary="Edit an automation",
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def update_automation(
    id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> dict[str, Any]:
    automation = owned(session, Automation, id, principal.account.id, "Automation not found.")
    body = validate(AutomationUpdate, raw, status=422)
    given = body.model_fields_set
    if "title" in given:
        if body.title is None:
            raise ValidationFailed({"title": ["The title field is required."]})
        automation.title = body.title
    if body.active is not None:
        set_active(session, automation, body.active, utcnow())
    if given & {"trigger_type", "trigger_list_id", "trigger_campaign_id"}:
        current = session.scalars(
            select(AutomationTrigger).where(AutomationTrigger.automation_id == automation.id)
        ).first()
        trigger_type = body.trigger_type or (current.type if current else None)
        same_type = current is not None and current.type == trigger_type
        list_id = (
            body.trigger_list_id
            if "trigger_list_id" in given
            else (current.list_id if same_type and current else None)
        )
        campaign_id = (
            body.trigger_campaign_id
            if "trigger_campaign_id" in given
            else (current.campaign_id if same_type and current else None)
        )
        trigger = resolve_trigger(session, principal, trigger_type, list_id, campaign_id)
        if trigger is not None:
            replace_trigger(session, automation, trigger)
    automation.updated_at = utcnow()
    session.flush()
    return automation_views(session, [automation], with_stats=False)[0]


@router.delete(
    "/automations/{id}",
    response_model=MessageOut,
    summary="Delete an automation and cancel what it has scheduled",
    responses={404: {"model": ErrorOut}},
)
def delete_automation(id: RowId, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    automation = owned(session, Automation, id, principal.account.id, "Automation not found.")
    now = utcnow()
    automation.deleted_at = now
    cancel_automation_sends(session, automation.id)
    session.execute(
        update(Campaign)
        .where(Campaign.automation_id == automation.id, Campaign.deleted_at.is_(None))
        .values(deleted_at=now)
    )
    session.flush()
    return MessageOut(message="Automation deleted.")


@router.post(
    "/automations/{id}/emails",
    status_code=201,
    response_model=AutomationItemOut,
    summary="Add an email to an automation",
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def add_automation_email(
    id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> dict[str, Any]:
    automation = owned(session, Automation, id, principal.account.id, "Automation not found.")
    body = validate(AutomationEmailCreate, raw, status=422)
    last_order = session.scalar(
        select(func.max(AutomationItem.send_order)).where(AutomationItem.automation_id == automation.id)
    )
    delay = (
        body.delay_hours
        if body.delay_hours is not None
        else (0 if last_order is None else DEFAULT_DELAY_HOURS)
    )
    campaign = Campaign(
        account_id=principal.account.id,
        automation_id=automation.id,
        title=body.subject,
        subject=body.subject,
        html=body.html,
        from_name=body.from_name,
        from_email=body.from_email,
        timezone=principal.account.timezone or None,
    )
    session.add(campaign)
    session.flush()
    item = AutomationItem(
        automation_id=automation.id,
        campaign_id=campaign.id,
        delay_hours=delay,
        send_order=(last_order or 0) + 1,
    )
    session.add(item)
    session.flush()
    return item_views(session, [item], with_stats=False)[0]


@router.patch(
    "/automation-emails/{id}",
    response_model=AutomationItemOut,
    summary="Edit an automation email, its delay or its place in the sequence",
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def update_automation_email(
    id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> dict[str, Any]:
    item, automation = owned_item(session, id, principal)
    body = validate(AutomationEmailUpdate, raw, status=422)
    given = body.model_fields_set
    nulled = [
        n for n in ("subject", "html", "from_name", "from_email") if n in given and getattr(body, n) is None
    ]
    if nulled:
        raise ValidationFailed({n: [f"The {n.replace('_', ' ')} field is required."] for n in nulled})
    campaign = session.get_one(Campaign, item.campaign_id)
    now = utcnow()
    for name in ("subject", "html", "from_name", "from_email"):
        if name in given:
            setattr(campaign, name, getattr(body, name))
            campaign.updated_at = now
    if body.subject is not None:
        campaign.title = body.subject
    if body.delay_hours is not None:
        item.delay_hours = body.delay_hours
    if body.send_order is not None:
        renumber(session, automation.id, moved=item, position=body.send_order)
    item.updated_at = now
    session.flush()
    return item_views(session, [item], with_stats=False)[0]
