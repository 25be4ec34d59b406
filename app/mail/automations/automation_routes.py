"""The /automations and /automation-emails routes (the rules and SQL are in automation_service.py)."""

from __future__ import annotations

from fastapi import APIRouter

from app.identity.dependencies import PaidMailUser
from app.kit.openapi import FORM, JSON, request_body
from app.mail.automations import automation_service
from app.mail.input import validate
from app.mail.request_input import MailInput, PagingDep, RowId
from app.mail.specs import AutomationCreate, AutomationEmailCreate, AutomationEmailUpdate, AutomationUpdate
from app.mail.wire import AutomationItemOut, AutomationOut, ErrorOut, MessageOut, Page
from app.request_sessions import SessionDep

router = APIRouter(tags=["Automations"])


@router.get("/automations", response_model=Page[AutomationOut], summary="List automations")
def list_automations(paging: PagingDep, session: SessionDep, principal: PaidMailUser) -> Page[AutomationOut]:
    return automation_service.automations_page(paging, session, principal)


@router.post(
    "/automations",
    openapi_extra=request_body(AutomationCreate, media_types=(JSON, FORM)),
    status_code=201,
    response_model=AutomationOut,
    summary="Create an automation",
    responses={403: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def create_automation(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> AutomationOut:
    body = validate(AutomationCreate, raw, status=422)
    return automation_service.create_automation(session, principal, body)


@router.get(
    "/automations/{id}",
    response_model=AutomationOut,
    summary="Get an automation with its triggers, emails and their stats",
    responses={404: {"model": ErrorOut}},
)
def get_automation(id: RowId, session: SessionDep, principal: PaidMailUser) -> AutomationOut:
    automation = automation_service.find_automation(session, principal, id)
    return automation_service.automations_wire(session, [automation], with_stats=True)[0]


@router.patch(
    "/automations/{id}",
    openapi_extra=request_body(AutomationUpdate, media_types=(JSON, FORM)),
    response_model=AutomationOut,
    summary="Edit an automation",
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def update_automation(
    id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> AutomationOut:
    automation = automation_service.find_automation(session, principal, id)
    body = validate(AutomationUpdate, raw, status=422)
    return automation_service.update_automation(session, principal, automation, body)


@router.delete(
    "/automations/{id}",
    response_model=MessageOut,
    summary="Delete an automation and cancel what it has scheduled",
    responses={404: {"model": ErrorOut}},
)
def delete_automation(id: RowId, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    automation = automation_service.find_automation(session, principal, id)
    automation_service.delete_automation(session, automation)
    return MessageOut(message="Automation deleted.")


@router.post(
    "/automations/{id}/emails",
    openapi_extra=request_body(AutomationEmailCreate, media_types=(JSON, FORM)),
    status_code=201,
    response_model=AutomationItemOut,
    summary="Add an email to an automation",
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def add_automation_email(
    id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> AutomationItemOut:
    automation = automation_service.find_automation(session, principal, id)
    body = validate(AutomationEmailCreate, raw, status=422)
    return automation_service.add_automation_email(session, principal, automation, body)


@router.patch(
    "/automation-emails/{id}",
    openapi_extra=request_body(AutomationEmailUpdate, media_types=(JSON, FORM)),
    response_model=AutomationItemOut,
    summary="Edit an automation email, its delay or its place in the sequence",
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def update_automation_email(
    id: RowId, session: SessionDep, principal: PaidMailUser, raw: MailInput
) -> AutomationItemOut:
    item, automation = automation_service.owned_item(session, id, principal)
    body = validate(AutomationEmailUpdate, raw, status=422)
    return automation_service.update_automation_email(session, automation, item, body)
