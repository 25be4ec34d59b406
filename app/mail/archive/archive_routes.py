"""The public archive's routes (archive_service.py): no credentials, limited per client address like
the "view in browser" page (TIDINGS_PUBLIC_PAGE_RATE_LIMIT); an archive that is off, a campaign not in
it and an unknown id are all 404.

- `GET /archive/{user id}`: the page listing the archived campaigns, newest first.
- `GET /archive/{user id}/feed.atom`: the same as an Atom feed.
- `GET /archive/{user id}/{campaign id}`: one archived campaign (its html, for a reader without names).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from app.app_state import SettingsDep, app_state
from app.config import Settings
from app.kit.client import client_address
from app.kit.templates import html_page, render
from app.kit.time import iso_millis, utcnow
from app.mail.archive.archive_service import Archive, archive, archived_email
from app.mail.archive.public_pages import WEB_VERSION_HEADERS, too_many_page
from app.mail.campaigns.campaign_preview_service import MailContext
from app.mail.sending.tokens import MailTokens
from app.request_sessions import SessionDep

router = APIRouter(include_in_schema=False)
ARCHIVE_HEADERS = {"Cache-Control": "public, max-age=300"}
INDEX_HEADERS = {
    **ARCHIVE_HEADERS,
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
}
NOT_FOUND_HEADERS = {**INDEX_HEADERS, "Cache-Control": "no-store"}
ID = re.compile(r"[1-9][0-9]{0,9}")
MAX_ID = 2**31 - 1


@cache
def _tokens(secret_key: str) -> MailTokens:
    return MailTokens(secret_key)


def _id(raw: str) -> int | None:
    return int(raw) if ID.fullmatch(raw) and int(raw) <= MAX_ID else None


async def _refused(request: Request) -> Response | None:
    decision = await app_state(request).public_page_limiter.hit("archive", client_address(request))
    return None if decision.allowed else too_many_page(decision.retry_after)


def _not_found() -> HTMLResponse:
    return html_page("unsubscribe/invalid_link.html", status=404, headers=NOT_FOUND_HEADERS)


async def _archive_or_answer(user: str, request: Request, session: SessionDep) -> Archive | Response:
    """The archive the path names, or the answer instead of it (429, 404)."""
    if (refused := await _refused(request)) is not None:
        return refused
    user_id = _id(user)
    found = await run_in_threadpool(archive, session, user_id) if user_id is not None else None
    return found if found is not None else _not_found()


def _links(settings: Settings, found: Archive) -> dict[str, Any]:
    base = f"{settings.base_url.rstrip('/')}/archive/{found.user_id}"
    return {
        "index_url": base,
        "feed_url": f"{base}/feed.atom",
        "campaign_url": lambda campaign_id: f"{base}/{campaign_id}",
    }


@router.get("/archive/{user}")
async def archive_page(user: str, request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    found = await _archive_or_answer(user, request, session)
    if isinstance(found, Response):
        return found
    links = _links(settings, found)
    return html_page(
        "archive/index.html",
        headers=INDEX_HEADERS,
        archive=found,
        feed_url=links["feed_url"],
        campaign_url=links["campaign_url"],
    )


@router.get("/archive/{user}/feed.atom")
async def archive_feed(user: str, request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    found = await _archive_or_answer(user, request, session)
    if isinstance(found, Response):
        return found
    newest = found.campaigns[0].sent_at if found.campaigns else utcnow()
    links = _links(settings, found)
    feed = render("archive/feed.atom", archive=found, updated=iso_millis(newest), stamp=iso_millis, **links)
    return Response(feed, media_type="application/atom+xml", headers=ARCHIVE_HEADERS)


@router.get("/archive/{user}/{campaign}")
async def archived_campaign(
    user: str, campaign: str, request: Request, session: SessionDep, settings: SettingsDep
) -> Response:
    if (refused := await _refused(request)) is not None:
        return refused
    user_id, campaign_id = _id(user), _id(campaign)
    if user_id is None or campaign_id is None:
        return _not_found()
    context = MailContext(_tokens(settings.resolved_secret_key), settings.base_url.rstrip("/"))
    page = await run_in_threadpool(archived_email, session, user_id, campaign_id, context)
    if page is None:
        return _not_found()
    return HTMLResponse(page, headers={**WEB_VERSION_HEADERS, "X-Robots-Tag": "all"})
