"""GET /me: the calling user and the account's contact count and limit (allowed on every plan); PATCH
/me (beyond SendFox, paid plans like the rest): the account's preferences."""

from __future__ import annotations

from fastapi import APIRouter

from app.identity.dependencies import MailUser, PaidMailUser
from app.kit.openapi import EXTENSION, FORM, JSON, request_body
from app.mail import me_service
from app.mail.input import validate
from app.mail.request_input import MailInput
from app.mail.specs import AccountPreferences
from app.mail.wire import ErrorOut, UserOut
from app.request_sessions import SessionDep

router = APIRouter(tags=["User"])


@router.get("/me", response_model=UserOut, summary="The authenticated user")
async def me(principal: MailUser) -> UserOut:
    # Async: it only reads the principal loaded by the dependency, so it need not take a worker thread.
    return me_service.me_wire(principal)


@router.patch(
    "/me",
    response_model=UserOut,
    summary="Change the account's preferences",
    description="Beyond SendFox: `track_opens` false leaves the open pixel out of every email of the "
    "account (campaigns and automation emails), whatever each says; true lets each campaign's own "
    "`track_opens` decide.",
    responses={403: {"model": ErrorOut}, 422: {"model": ErrorOut}},
    openapi_extra={**EXTENSION, **request_body(AccountPreferences, media_types=(JSON, FORM))},
)
def update_me(session: SessionDep, principal: PaidMailUser, raw: MailInput) -> UserOut:
    body = validate(AccountPreferences, raw, status=422)
    return me_service.update_preferences(session, principal, body)
