"""The signed-in person's own pages: sign in and out with the session cookie, and /account/tokens to
create and revoke personal access tokens for the email API (shown once, revoked at once) and to
disconnect the apps they let in through OAuth."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session
from starlette.background import BackgroundTask

from app.app_state import SettingsDep, app_state
from app.authroutes.body import read_form
from app.authroutes.pages import local_path, page, redirect, sign_in_form, sign_in_url, with_cookies
from app.identity.dependencies import OptionalSessionUser
from app.identity.oauth.connections import ConnectedApp, connected_apps, disconnect_app
from app.identity.origin_guard import check_cookie_origin, check_sign_in_origin
from app.identity.session_cookie import clear_session_cookie, session_token, set_session_cookie
from app.identity.sessions import end_session
from app.identity.sign_in import sign_in_with_password
from app.identity.token_lookup import forget_accounts
from app.identity.tokens import create_personal_token, live_personal_tokens, revoke_personal_token
from app.kit.errors import DomainError
from app.models import PersonalToken, User
from app.request_sessions import SessionDep

router = APIRouter(include_in_schema=False)
TOKENS_PATH = "/account/tokens"
TOKEN_NAME_MAX_LENGTH = 191
# A token id is an INTEGER column: a larger number names no token (404) instead of overflowing the driver.
TokenId = Annotated[int, PathParam(ge=1, le=2**31 - 1)]
# An OAuth client's public id (app/identity/oauth/clients.py makes them; the column holds 64).
ClientId = Annotated[str, PathParam(min_length=1, max_length=64)]


async def _form(request: Request) -> dict[str, str]:
    form = await read_form(request)
    return {key: value for key, value in form.items() if isinstance(value, str)}


@router.get("/account/sign-in")
def sign_in_page(request: Request, response: Response, signed_in: OptionalSessionUser) -> Response:
    next_path = local_path(request.query_params.get("next"))
    if signed_in is not None:
        return with_cookies(redirect(next_path), response)
    return with_cookies(sign_in_form(next_path), response)


@router.post("/account/sign-in", dependencies=[Depends(check_sign_in_origin)])
async def sign_in_submit(request: Request, db: SessionDep, settings: SettingsDep) -> Response:
    form = await _form(request)
    next_path = local_path(form.get("next"))
    username, password = form.get("username", ""), form.get("password", "")

    def again(error: str, status: int) -> HTMLResponse:
        return sign_in_form(next_path, error=error, username=username[:30], status=status)

    try:
        signed_in = await sign_in_with_password(
            db,
            app_state(request).sign_in_throttle,
            username=username,
            password=password,
            address=request.client.host if request.client else "unknown",
            user_agent=request.headers.get("user-agent"),
        )
    except DomainError as refused:
        if refused.status == 429:
            page_429 = again("Too many failed sign-ins. Please try again later.", 429)
            page_429.headers.update(refused.headers)
            return page_429
        return again("Invalid username or password.", 401)
    response = redirect(next_path)
    set_session_cookie(response, signed_in.token, settings, remember=True)
    return response


@router.post("/account/sign-out", dependencies=[Depends(check_cookie_origin)])
def sign_out_submit(request: Request, db: SessionDep, settings: SettingsDep) -> Response:
    token = session_token(request, settings)
    if token is not None:
        end_session(db, token)
    response = redirect("/account/sign-in")
    clear_session_cookie(response, settings)
    return response


@dataclass(frozen=True)
class TokensPage:
    """What the tokens page lists: the person's own tokens and the apps they connected through OAuth."""

    tokens: list[PersonalToken]
    apps: list[ConnectedApp]


def _listed(db: Session, user_id: int) -> TokensPage:
    return TokensPage(live_personal_tokens(db, user_id), connected_apps(db, user_id))


def _tokens_page(
    user: User, listed: TokensPage, *, new_token: str = "", error: str = "", status: int = 200
) -> HTMLResponse:
    return page(
        "account/tokens.html",
        status=status,
        user=user,
        tokens=listed.tokens,
        apps=listed.apps,
        new_token=new_token,
        error=error,
        name_max_length=TOKEN_NAME_MAX_LENGTH,
    )


@router.get(TOKENS_PATH)
def tokens_page(response: Response, signed_in: OptionalSessionUser, db: SessionDep) -> Response:
    if signed_in is None:
        return with_cookies(redirect(sign_in_url(TOKENS_PATH)), response)
    return with_cookies(_tokens_page(signed_in.user, _listed(db, signed_in.user.id)), response)


@router.post(TOKENS_PATH, dependencies=[Depends(check_cookie_origin)])
async def create_token_submit(
    request: Request, response: Response, signed_in: OptionalSessionUser, db: SessionDep
) -> Response:
    if signed_in is None:
        return with_cookies(redirect(sign_in_url(TOKENS_PATH)), response)
    name = (await _form(request)).get("name", "").strip()
    user = signed_in.user
    if len(name) > TOKEN_NAME_MAX_LENGTH or "\x00" in name:
        listed = await run_in_threadpool(_listed, db, user.id)
        error = f"A name is at most {TOKEN_NAME_MAX_LENGTH} characters."
        return with_cookies(_tokens_page(user, listed, error=error, status=400), response)
    listed, token = await run_in_threadpool(_create_token, db, user, name)
    return with_cookies(_tokens_page(user, listed, new_token=token, status=201), response)


def _create_token(db: Session, user: User, name: str) -> tuple[TokensPage, str]:
    _, token = create_personal_token(db, user, name)
    return _listed(db, user.id), token


@router.post(TOKENS_PATH + "/{token_id}/revoke", dependencies=[Depends(check_cookie_origin)])
def revoke_token_submit(
    request: Request, response: Response, token_id: TokenId, signed_in: OptionalSessionUser, db: SessionDep
) -> Response:
    if signed_in is None:
        return with_cookies(redirect(sign_in_url(TOKENS_PATH)), response)
    revoked = revoke_personal_token(db, signed_in.user.id, token_id) is not None
    return _after_revoking(request, response, signed_in.user, revoked=revoked)


def _after_revoking(request: Request, response: Response, user: User, *, revoked: bool) -> Response:
    """Back to the tokens page once something was revoked (a 404 page when nothing was)."""
    if not revoked:
        return with_cookies(page("account/no_such_token.html", status=404, user=user), response)
    # This process may remember the token for a second: forget it now, and again once the revocation is
    # committed (a request in between could have looked the token up again), so it counts at once.
    lookup = app_state(request).token_lookup
    lookup.forget_account(user.account_id)
    done = redirect(TOKENS_PATH)
    done.background = BackgroundTask(forget_accounts, lookup, [user.account_id])
    return with_cookies(done, response)


@router.post(TOKENS_PATH + "/apps/{client_id}/revoke", dependencies=[Depends(check_cookie_origin)])
def revoke_app_submit(
    request: Request, response: Response, client_id: ClientId, signed_in: OptionalSessionUser, db: SessionDep
) -> Response:
    """Disconnect an app the person let in through OAuth: every token it holds for them stops working."""
    if signed_in is None:
        return with_cookies(redirect(sign_in_url(TOKENS_PATH)), response)
    revoked = disconnect_app(db, signed_in.user.id, client_id)
    return _after_revoking(request, response, signed_in.user, revoked=revoked)
