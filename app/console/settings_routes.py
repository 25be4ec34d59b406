"""The console's Engines (which language-model engine is set up, whether it answers, and how to set
one up: GET /v1/engines's own statuses), Tokens and apps (the account page /account/tokens), and Account
(who you are, the plan, and the sending limits and warm-up as they apply now)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from app.app_state import SettingsDep
from app.console.pages import CONSOLE, ConsoleUser
from app.identity.accounts import sending_allowance
from app.identity.origin_guard import check_cookie_origin
from app.kit.time import utcnow
from app.watches.dependencies import request_engines

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])


@router.get(CONSOLE + "/engines")
async def engines_page(request: Request, me: ConsoleUser) -> Response:
    statuses = await request_engines(request).statuses()
    return me.page("engines.html", section="engines", engines=statuses)


@router.get(CONSOLE + "/tokens")
def tokens_page(me: ConsoleUser) -> Response:
    # The personal tokens page predates the console and stays where clients link to it.
    return me.redirect("/account/tokens")


@router.get(CONSOLE + "/account")
def account_page(me: ConsoleUser, settings: SettingsDep) -> Response:
    allowance = sending_allowance(me.account, settings.daily_send_limit, utcnow())
    return me.page("account.html", section="account", user=me.user, account=me.account, allowance=allowance)
