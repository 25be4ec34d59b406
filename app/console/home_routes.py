"""The console's Home: what is sending and how the latest campaigns did (opens, clicks), the contacts
added this week, and any campaign the automatic stop halted, with why (app/mail/overview.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from app.console.pages import CONSOLE, ConsoleUser
from app.identity.origin_guard import check_cookie_origin
from app.kit.time import utcnow
from app.mail.overview import NEW_CONTACT_DAYS, account_overview

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])


@router.get(CONSOLE + "/home")
def home_page(me: ConsoleUser) -> Response:
    overview = account_overview(me.db, me.account_id, me.principal.account.contacts_count, utcnow())
    return me.page("home.html", section="home", overview=overview, days=NEW_CONTACT_DAYS)
