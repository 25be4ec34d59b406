"""The public routes the emails themselves link to: open pixel, click redirect, unsubscribe, and the relay's
bounce webhook (its body format is in bounces.py). No API credentials; tokens are signed (sending/tokens.py)
and a forged or altered one is 404. None of these routes is part of the email API's OpenAPI document.

- `GET /t/o/{token}`: a 1x1 transparent GIF (`Cache-Control: no-store`); the first open of the email
  sets its opened_at.
- `GET /t/c/{token}`: 302 to exactly the URL the token signs (never anywhere else); every click is kept
  with that URL (the report's clicks per link); the first sets clicked_at, and opened_at too when no
  open was recorded (images are often blocked).
- `GET /u/{token}`: a page asking to confirm; it never unsubscribes (mail scanners fetch links).
  `POST /u/{token}`: unsubscribes, whatever the body (RFC 8058's `List-Unsubscribe=One-Click`, which
  the page's form sends too, or nothing), and answers a page saying so. Repeats change nothing.
- `GET /w/{token}`: the email as its reader got it ("view in browser", web_version_service.py); a
  forged or altered token is 404. Limited per client address (TIDINGS_PUBLIC_PAGE_RATE_LIMIT).
- `POST /webhooks/bounces`: reports of the SMTP relay, authenticated by a shared secret (bounces.py).
A first open or click fires the open_campaign and click_campaign automations (automation_runs.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from string import printable
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from app.app_state import SettingsDep, app_state
from app.identity.dependencies import Unauthenticated, bearer_token
from app.kit.body import read_capped
from app.kit.client import client_address
from app.kit.errors import NotFound
from app.kit.templates import html_page
from app.kit.time import utcnow
from app.mail.archive.public_pages import WEB_VERSION_HEADERS, too_many_page
from app.mail.archive.web_version_service import web_version_html
from app.mail.bounces.reports import MAX_BODY_BYTES, Report, apply_reports, parse_reports
from app.mail.campaigns.campaign_preview_service import MailContext
from app.mail.sending.queue import BounceRule
from app.mail.sending.tokens import MailTokens, mail_tokens
from app.mail.tracking_service import (
    Sender,
    record_click,
    record_open,
    record_open_on_pool,
    sender_of,
    unsubscribe_by_link,
)
from app.request_sessions import SessionDep, WriteSessionDep

# The smallest transparent GIF (42 bytes).
PIXEL = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
NO_STORE = {"Cache-Control": "no-store"}
# Pages reached by a token in their URL: not cached, not indexed, the token not sent on as a referrer,
# nothing loaded from anywhere, and the form posting only back here.
PAGE_HEADERS = {
    **NO_STORE,
    "X-Robots-Tag": "noindex",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
}
# Characters a Location header may carry as they are: printable ASCII but the space. The rest of a
# signed URL (spaces, non-ASCII) is percent-encoded; a URL that is already plain ASCII goes out unchanged.
_LOCATION_SAFE = "".join(c for c in printable if c not in " \t\n\r\x0b\x0c")

router = APIRouter(include_in_schema=False)


def tokens_of(request: Request) -> MailTokens:
    return mail_tokens(app_state(request).settings.resolved_secret_key)


# ---------------------------------------------------------------------------------------------- pages


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page of app/templates/unsubscribe/ (the click redirect's 404 too) with this module's headers."""
    return html_page(template, status=status, headers=PAGE_HEADERS, **context)


def _not_found_page() -> HTMLResponse:
    return _page("unsubscribe/invalid_link.html", 404)


def _confirm_page(sender: Sender) -> HTMLResponse:
    return _page("unsubscribe/confirm.html", from_name=sender.from_name)


def _done_page(sender: Sender) -> HTMLResponse:
    return _page("unsubscribe/done.html", from_name=sender.from_name)


# ---------------------------------------------------------------------------------------------- routes


@router.get("/t/o/{token}")
async def open_pixel(token: str, request: Request, session: WriteSessionDep) -> Response:
    """On PostgreSQL the open is recorded on the event loop (the pixel is the busiest route when a
    campaign lands); on SQLite, and for an open that fires an automation, through the request's session."""
    deliverable_id = tokens_of(request).read_open(token)
    if deliverable_id is None:
        return Response(status_code=404, headers=NO_STORE)
    pool, now = app_state(request).async_pool, utcnow()
    if pool is None or not await record_open_on_pool(pool, deliverable_id, now):
        await run_in_threadpool(record_open, session, deliverable_id, now)
    return Response(PIXEL, media_type="image/gif", headers=NO_STORE)


@router.get("/t/c/{token}")
def click_redirect(token: str, request: Request, session: WriteSessionDep) -> Response:
    signed = tokens_of(request).read_click(token)
    if signed is None or urlsplit(signed[1]).scheme.lower() not in ("http", "https"):
        return _not_found_page()
    deliverable_id, url = signed
    record_click(session, deliverable_id, url, utcnow())
    return Response(
        status_code=302,
        headers={**NO_STORE, "Location": quote(url, safe=_LOCATION_SAFE), "Referrer-Policy": "no-referrer"},
    )


@router.get("/w/{token}")
async def web_version(token: str, request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    state = app_state(request)
    decision = await state.public_page_limiter.hit("web-version", client_address(request))
    if not decision.allowed:
        return too_many_page(decision.retry_after)
    signed = tokens_of(request).read_web_version(token)
    if signed is None:
        return _not_found_page()
    context = MailContext(tokens_of(request), settings.base_url.rstrip("/"))
    page = await run_in_threadpool(web_version_html, session, *signed, context)
    if page is None:
        return _not_found_page()
    return HTMLResponse(page, headers=WEB_VERSION_HEADERS)


@router.get("/u/{token}")
def unsubscribe_page(token: str, request: Request, session: SessionDep) -> Response:
    deliverable_id = tokens_of(request).read_unsubscribe(token)
    sender = sender_of(session, deliverable_id) if deliverable_id is not None else None
    if sender is None:
        return _not_found_page()
    return _confirm_page(sender)


@router.post("/u/{token}")
def unsubscribe_one_click(token: str, request: Request, session: SessionDep) -> Response:
    # The body is never read: RFC 8058 clients send `List-Unsubscribe=One-Click`, others nothing, and
    # the signed token alone says who leaves.
    deliverable_id = tokens_of(request).read_unsubscribe(token)
    sender = unsubscribe_by_link(session, deliverable_id, utcnow()) if deliverable_id is not None else None
    if sender is None:
        return _not_found_page()
    return _done_page(sender)


async def bounce_reports(request: Request) -> list[Report]:
    """The webhook's caller checked, then its body parsed (nothing is read from a caller without the
    secret)."""
    secret = app_state(request).settings.bounce_webhook_secret
    if not secret:
        raise NotFound("Not Found.")
    given = bearer_token(request) or ""
    # Digests of equal length: compare_digest would otherwise tell the secret's length by its timing.
    if not hmac.compare_digest(_digest(given), _digest(secret)):
        raise Unauthenticated()
    return parse_reports(await read_capped(request, MAX_BODY_BYTES))


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).digest()


@router.post("/webhooks/bounces")
def bounce_webhook(
    settings: SettingsDep, session: SessionDep, reports: Annotated[list[Report], Depends(bounce_reports)]
) -> dict[str, int]:
    rule = BounceRule.from_settings(settings)
    applied = apply_reports(session, reports, utcnow(), rule, mail_tokens(settings.resolved_secret_key))
    return {"processed": applied.processed, "ignored": applied.ignored}
