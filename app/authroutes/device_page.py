"""/account/device: where a signed-in person types the code their command line shows, and approves or
denies that command line's device session (the page behind the `verification_uri` of
`POST /v1/auth/device-sessions`; the same rules as `POST /v1/auth/device-sessions/{code}/complete`)."""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from app.authroutes.body import read_form
from app.authroutes.pages import DEVICE_PATH, page, redirect, sign_in_url, with_cookies
from app.identity.dependencies import OptionalSessionUser
from app.identity.device_sessions import USER_CODE_LENGTH, complete_device_session, normalize_user_code
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.models import User
from app.request_sessions import SessionDep

router = APIRouter(include_in_schema=False)
# The code as shown (`BCDF-GHJK`), with room for the spaces and dashes people type.
CODE_INPUT_MAX_LENGTH = 32


def _code_form(user: User, code: str = "", error: str = "", status: int = 200) -> HTMLResponse:
    return page(
        "account/device.html",
        status=status,
        user=user,
        code=code,
        error=error,
        code_max_length=CODE_INPUT_MAX_LENGTH,
    )


def _shown(code: str) -> str:
    """`bcdfghjk` as the command line shows it, `BCDF-GHJK`; anything else as typed."""
    normalized = normalize_user_code(code)
    if len(normalized) != USER_CODE_LENGTH:
        return code.strip()
    return f"{normalized[:4]}-{normalized[4:]}"


@router.get(DEVICE_PATH)
def device_page(request: Request, response: Response, signed_in: OptionalSessionUser) -> Response:
    code = request.query_params.get("user_code", "")[:CODE_INPUT_MAX_LENGTH]
    if signed_in is None:
        here = DEVICE_PATH + (f"?{urlencode({'user_code': _shown(code)})}" if code else "")
        return with_cookies(redirect(sign_in_url(here)), response)
    return with_cookies(_code_form(signed_in.user, _shown(code)), response)


@router.post(DEVICE_PATH, dependencies=[Depends(check_cookie_origin)])
async def device_submit(
    request: Request, response: Response, signed_in: OptionalSessionUser, db: SessionDep
) -> Response:
    if signed_in is None:
        return with_cookies(redirect(sign_in_url(DEVICE_PATH)), response)
    form = await read_form(request)
    raw_code, decision = form.get("user_code"), form.get("decision")
    code = raw_code[:CODE_INPUT_MAX_LENGTH] if isinstance(raw_code, str) else ""
    user = signed_in.user
    if decision not in ("approve", "deny"):
        return with_cookies(_code_form(user, _shown(code), "Choose Approve or Deny.", 400), response)
    approve = decision == "approve"
    try:
        await run_in_threadpool(complete_device_session, db, code, user.id, approve=approve)
    except DomainError as refused:
        return with_cookies(_code_form(user, _shown(code), refused.message, refused.status), response)
    return with_cookies(page("account/device_done.html", user=user, approved=approve), response)
