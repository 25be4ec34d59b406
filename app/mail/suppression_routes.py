"""The /suppressions routes, beyond SendFox (the rules and SQL are in suppression_service.py)."""

from __future__ import annotations

from fastapi import APIRouter

from app.identity.dependencies import PaidMailUser
from app.kit.openapi import EXTENSION, FORM, JSON, request_body
from app.mail import suppression_service
from app.mail.input import validate
from app.mail.request_input import MailInput, PagingDep
from app.mail.specs import SuppressionCreate
from app.mail.wire import ErrorOut, MessageOut, Page, SuppressionOut, SuppressionsAddedOut
from app.request_sessions import SessionDep

# Marked in the OpenAPI document as an extension: SendFox's API has no suppression list.
BEYOND = "Beyond SendFox: "

router = APIRouter(tags=["Suppressions"])


@router.get(
    "/suppressions",
    response_model=Page[SuppressionOut],
    summary="List the suppressed addresses",
    description=BEYOND + "the account's suppression list (hard bounces, complaints, and addresses added "
    "by POST /suppressions), oldest first, 100 a page.",
    openapi_extra=EXTENSION,
)
def list_suppressions(
    paging: PagingDep, session: SessionDep, principal: PaidMailUser
) -> Page[SuppressionOut]:
    return suppression_service.suppressions_page(session, paging, principal)


@router.post(
    "/suppressions",
    response_model=SuppressionsAddedOut,
    summary="Suppress addresses",
    description=BEYOND + "never send to these addresses again, from any campaign or automation, even "
    "when imported again as contacts. `email` (one address), `emails` (up to 1000), or both; emails "
    "already queued for them are cancelled. Adding a listed address again changes nothing.",
    responses={422: {"model": ErrorOut}},
    openapi_extra={**EXTENSION, **request_body(SuppressionCreate, media_types=(JSON, FORM))},
)
def add_suppressions(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> SuppressionsAddedOut:
    body = validate(SuppressionCreate, raw, status=422)
    created, existing = suppression_service.add_suppressions(session, principal, body)
    return SuppressionsAddedOut(created=created, existing=existing)


@router.delete(
    "/suppressions/{email}",
    response_model=MessageOut,
    summary="Remove an address from the suppression list",
    description=BEYOND + "the address may be sent to again (a hard-bounced contact with it becomes "
    "sendable; an unsubscribed one stays unsubscribed).",
    responses={404: {"model": ErrorOut}},
    openapi_extra=EXTENSION,
)
def delete_suppression(email: str, session: SessionDep, principal: PaidMailUser) -> MessageOut:
    suppression_service.remove_suppression(session, principal, email)
    return MessageOut(message="Suppression removed.")
