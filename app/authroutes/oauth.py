"""OAuth 2.0 for the email API: GET /oauth/authorize (a sign-in page, then a consent page),
POST /oauth/authorize (the person's decision) and POST /oauth/token (code exchange and refresh)."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode, urlsplit

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask

from app.authroutes.pages import page, redirect, sign_in_form, signed_in_line, this_path, with_cookies
from app.config import Settings
from app.db import SessionDep
from app.identity.dependencies import OptionalSessionUser
from app.identity.oauth.authorization import (
    AuthorizationRefused,
    ConsentRequest,
    decide_authorization,
    exchange_token,
    review_authorization,
)
from app.identity.oauth.server import OAuthReply
from app.identity.origin_guard import check_cookie_origin
from app.identity.token_lookup import CachedTokenLookup, forget_accounts

router = APIRouter(include_in_schema=False)


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _refused_page(refusal: AuthorizationRefused) -> Response:
    body = (
        "<h1>This authorization request cannot be used</h1>"
        f'<p role="alert">{escape(refusal.message)}</p>'
        "<p>Go back to the application that sent you here and tell its developers.</p>"
    )
    return page("Authorization refused", body, status=400)


def _client_redirect(reply: OAuthReply, *, after_post: bool) -> Response:
    location = dict(reply.headers).get("Location", "")
    # 303 after the consent form: the browser follows it with a GET, whatever it posted.
    return redirect(location, status=303 if after_post else 302)


def _consent_page(consent: ConsentRequest, signed_in_user_line: str) -> str:
    parameters = dict(consent.parameters)
    hidden = "".join(
        f'<input type="hidden" name="{escape(key)}" value="{escape(value)}">'
        for key, value in consent.parameters
    )
    destination = urlsplit(parameters.get("redirect_uri", "")).netloc
    back_to = f" You will then be sent back to <strong>{escape(destination)}</strong>." if destination else ""
    name = escape(consent.client_name)
    return (
        f"{signed_in_user_line}<h1>Allow {name} to use your Tidings account?</h1>"
        f"<p><strong>{name}</strong> asks for access to the email API as you: to read and change your "
        "contacts, lists, campaigns, automations and forms, and to send campaigns. It keeps this access "
        f"until you revoke it.{back_to}</p>"
        f'<form method="post" action="/oauth/authorize">{hidden}'
        '<button type="submit" name="decision" value="allow">Allow</button>'
        '<button type="submit" name="decision" value="deny" class="secondary">Deny</button></form>'
    )


@router.get("/oauth/authorize")
async def authorize_page(
    request: Request, response: Response, signed_in: OptionalSessionUser, db: SessionDep
) -> Response:
    user = signed_in.user if signed_in is not None else None
    pairs = list(request.query_params.multi_items())
    result = await run_in_threadpool(review_authorization, db, _settings(request), pairs, user)
    if isinstance(result, AuthorizationRefused):
        return with_cookies(_refused_page(result), response)
    if isinstance(result, OAuthReply):
        return with_cookies(_client_redirect(result, after_post=False), response)
    if signed_in is None:
        intro = (
            f"<p><strong>{escape(result.client_name)}</strong> asks for access to your Tidings account. "
            "Sign in first; you will then be asked whether to allow it.</p>"
        )
        body = sign_in_form(this_path(request), heading="Sign in to Tidings", intro=intro)
        return with_cookies(page("Sign in", body), response)
    return with_cookies(
        page("Allow access?", _consent_page(result, signed_in_line(signed_in.user))), response
    )


@router.post("/oauth/authorize", dependencies=[Depends(check_cookie_origin)])
async def authorize_decision(
    request: Request, response: Response, signed_in: OptionalSessionUser, db: SessionDep
) -> Response:
    form = await request.form()
    pairs = [(key, value) for key, value in form.multi_items() if isinstance(value, str)]
    decision = dict(pairs).get("decision")
    pairs = [(key, value) for key, value in pairs if key != "decision"]
    if signed_in is None:
        back = "/oauth/authorize?" + urlencode(pairs)
        body = sign_in_form(back, heading="Sign in to Tidings", error="Your session ended: sign in again.")
        return with_cookies(page("Sign in", body, status=401), response)
    if decision not in ("allow", "deny"):
        return _refused_page(AuthorizationRefused("invalid_request: choose Allow or Deny."))
    result = await run_in_threadpool(
        lambda: decide_authorization(
            db, _settings(request), pairs, signed_in.user, approved=decision == "allow"
        )
    )
    if isinstance(result, AuthorizationRefused):
        return with_cookies(_refused_page(result), response)
    return with_cookies(_client_redirect(result, after_post=True), response)


@router.post("/oauth/token")
async def token_endpoint(request: Request, db: SessionDep) -> Response:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    # RFC 6749 3.2: form-encoded parameters only; anything else reads as no parameters.
    pairs = []
    if content_type == "application/x-www-form-urlencoded":
        form = await request.form()
        pairs = [(key, value) for key, value in form.multi_items() if isinstance(value, str)]
    exchange = await run_in_threadpool(exchange_token, db, _settings(request), pairs, request.headers)
    reply = exchange.reply
    headers = {key: value for key, value in reply.headers if key.lower() != "content-type"}
    answer = JSONResponse(reply.body, status_code=reply.status, headers=headers)
    if exchange.revoked_account_ids:
        # Tokens were revoked (a refresh, a replayed code): forget what this process remembers of them
        # now, and again once that is committed, so a lookup in between cannot keep them alive.
        lookup: CachedTokenLookup = request.app.state.token_lookup
        await forget_accounts(lookup, exchange.revoked_account_ids)
        answer.background = BackgroundTask(forget_accounts, lookup, exchange.revoked_account_ids)
    return answer
