"""OAuth 2.0 for the email API: GET /oauth/authorize (a sign-in page, then a consent page),
POST /oauth/authorize (the person's decision), POST /oauth/token (code exchange and refresh) and
POST /oauth/revoke (RFC 7009: an integration revokes a token it holds)."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask

from app.app_state import SettingsDep, app_state
from app.authroutes.body import read_form
from app.authroutes.pages import page, redirect, sign_in_form, this_path, with_cookies
from app.identity.dependencies import OptionalSessionUser
from app.identity.oauth.authorization import (
    AuthorizationRefused,
    ConsentRequest,
    TokenExchange,
    decide_authorization,
    exchange_token,
    review_authorization,
    revoke_token_request,
)
from app.identity.oauth.server import OAuthReply
from app.identity.origin_guard import check_cookie_origin
from app.identity.token_lookup import forget_accounts
from app.models import User
from app.request_sessions import SessionDep

router = APIRouter(include_in_schema=False)


def _refused_page(refusal: AuthorizationRefused) -> Response:
    return page("account/refused.html", status=400, message=refusal.message)


def _client_redirect(reply: OAuthReply, *, after_post: bool) -> Response:
    location = dict(reply.headers).get("Location", "")
    # 303 after the consent form: the browser follows it with a GET, whatever it posted.
    return redirect(location, status=303 if after_post else 302)


def _consent_page(consent: ConsentRequest, user: User) -> Response:
    destination = urlsplit(dict(consent.parameters).get("redirect_uri", "")).netloc
    return page(
        "account/consent.html",
        user=user,
        client_name=consent.client_name,
        parameters=consent.parameters,
        destination=destination,
    )


@router.get("/oauth/authorize")
async def authorize_page(
    request: Request,
    response: Response,
    signed_in: OptionalSessionUser,
    db: SessionDep,
    settings: SettingsDep,
) -> Response:
    user = signed_in.user if signed_in is not None else None
    pairs = list(request.query_params.multi_items())
    result = await run_in_threadpool(review_authorization, db, settings, pairs, user)
    if isinstance(result, AuthorizationRefused):
        return with_cookies(_refused_page(result), response)
    if isinstance(result, OAuthReply):
        return with_cookies(_client_redirect(result, after_post=False), response)
    if signed_in is None:
        return with_cookies(sign_in_form(this_path(request), client_name=result.client_name), response)
    return with_cookies(_consent_page(result, signed_in.user), response)


@router.post("/oauth/authorize", dependencies=[Depends(check_cookie_origin)])
async def authorize_decision(
    request: Request,
    response: Response,
    signed_in: OptionalSessionUser,
    db: SessionDep,
    settings: SettingsDep,
) -> Response:
    form = await read_form(request)
    pairs = [(key, value) for key, value in form.multi_items() if isinstance(value, str)]
    decision = dict(pairs).get("decision")
    pairs = [(key, value) for key, value in pairs if key != "decision"]
    if signed_in is None:
        back = "/oauth/authorize?" + urlencode(pairs)
        error = "Your session ended: sign in again."
        return with_cookies(sign_in_form(back, error=error, status=401), response)
    if decision not in ("allow", "deny"):
        return _refused_page(AuthorizationRefused("invalid_request: choose Allow or Deny."))
    result = await run_in_threadpool(
        lambda: decide_authorization(db, settings, pairs, signed_in.user, approved=decision == "allow")
    )
    if isinstance(result, AuthorizationRefused):
        return with_cookies(_refused_page(result), response)
    return with_cookies(_client_redirect(result, after_post=True), response)


async def _form_pairs(request: Request) -> list[tuple[str, str]]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    # RFC 6749 3.2 (and RFC 7009 2.1): form-encoded parameters only; anything else reads as none.
    if content_type != "application/x-www-form-urlencoded":
        return []
    form = await read_form(request)
    return [(key, value) for key, value in form.multi_items() if isinstance(value, str)]


@router.post("/oauth/token")
async def token_endpoint(request: Request, db: SessionDep, settings: SettingsDep) -> Response:
    pairs = await _form_pairs(request)
    exchange = await run_in_threadpool(exchange_token, db, settings, pairs, request.headers)
    return await _token_reply(request, exchange)


@router.post("/oauth/revoke")
async def revocation_endpoint(request: Request, db: SessionDep, settings: SettingsDep) -> Response:
    """RFC 7009: an integration revokes a token it holds (and with it the grant it came from)."""
    pairs = await _form_pairs(request)
    revocation = await run_in_threadpool(revoke_token_request, db, settings, pairs, request.headers)
    return await _token_reply(request, revocation)


async def _token_reply(request: Request, exchange: TokenExchange) -> Response:
    reply = exchange.reply
    headers = {key: value for key, value in reply.headers if key.lower() != "content-type"}
    answer = JSONResponse(reply.body, status_code=reply.status, headers=headers)
    if exchange.revoked_account_ids:
        # Tokens were revoked (a refresh, a replayed code): forget what this process remembers of them
        # now, and again once that is committed, so a lookup in between cannot keep them alive.
        lookup = app_state(request).token_lookup
        await forget_accounts(lookup, exchange.revoked_account_ids)
        answer.background = BackgroundTask(forget_accounts, lookup, exchange.revoked_account_ids)
    return answer
