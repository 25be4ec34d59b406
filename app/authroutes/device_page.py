"""/account/device: where a signed-in person types the code their command line shows, and approves or
denies that command line's device session (the page behind the `verification_uri` of
`POST /v1/auth/device-sessions`; the same rules as `POST /v1/auth/device-sessions/{code}/complete`)."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.authroutes.pages import page, redirect, sign_in_url, signed_in_line, with_cookies
from app.db import SessionDep
from app.identity.dependencies import OptionalSessionUser
from app.identity.device_sessions import USER_CODE_LENGTH, complete_device_session, normalize_user_code
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.models import User

router = APIRouter(include_in_schema=False)
DEVICE_PATH = "/account/device"
# The code as shown (`BCDF-GHJK`), with room for the spaces and dashes people type.
CODE_INPUT_MAX_LENGTH = 32


def _code_form(user: User, code: str = "", error: str = "") -> str:
    alert = f'<p role="alert">{escape(error)}</p>' if error else ""
    return (
        signed_in_line(user)
        + "<h1>Sign in a command line</h1>"
        + "<p>Type the code your command line shows. Approve it only if you started that sign-in: the "
        "command line gets a personal access token that acts as you.</p>"
        + alert
        + f'<form method="post" action="{DEVICE_PATH}">'
        '<label for="user-code">Code</label>'
        f'<input type="text" id="user-code" name="user_code" value="{escape(code)}" required '
        f'maxlength="{CODE_INPUT_MAX_LENGTH}" autocomplete="off" autocapitalize="characters" '
        'spellcheck="false" placeholder="BCDF-GHJK">'
        '<button type="submit" name="decision" value="approve">Approve</button>'
        '<button type="submit" name="decision" value="deny" class="secondary">Deny</button></form>'
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
    return with_cookies(page("Sign in a command line", _code_form(signed_in.user, _shown(code))), response)


@router.post(DEVICE_PATH, dependencies=[Depends(check_cookie_origin)])
async def device_submit(
    request: Request, response: Response, signed_in: OptionalSessionUser, db: SessionDep
) -> Response:
    if signed_in is None:
        return with_cookies(redirect(sign_in_url(DEVICE_PATH)), response)
    form = await request.form()
    raw_code, decision = form.get("user_code"), form.get("decision")
    code = raw_code[:CODE_INPUT_MAX_LENGTH] if isinstance(raw_code, str) else ""
    user = signed_in.user
    if decision not in ("approve", "deny"):
        body = _code_form(user, _shown(code), "Choose Approve or Deny.")
        return with_cookies(page("Sign in a command line", body, status=400), response)
    approve = decision == "approve"
    try:
        await run_in_threadpool(complete_device_session, db, code, user.id, approve=approve)
    except DomainError as refused:
        body = _code_form(user, _shown(code), refused.message)
        return with_cookies(page("Sign in a command line", body, status=refused.status), response)
    outcome = (
        "<h1>Command line approved</h1><p>Go back to your command line: it is signed in as you.</p>"
        if approve
        else "<h1>Command line denied</h1><p>That command line was refused and gets no token.</p>"
    )
    return with_cookies(page("Sign in a command line", signed_in_line(user) + outcome), response)
