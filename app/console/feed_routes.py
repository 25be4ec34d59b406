"""The console's Feeds: the list (sources, last poll, errors with their retry time, item counts), a new feed
from an RSS URL, a Hacker News query or a subreddit with the API's dry-run preview, a feed's items and
sources, pause, resume, edit and delete. Every write is the /v1 feed service's, with its validation."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Response

from app.app_state import SettingsDep
from app.console.pages import CONSOLE, ConsoleUser, PostedForm, item_view, messages_of
from app.feeds import feed_service
from app.feeds.item_service import item_page
from app.feeds.specs import FeedEdit, FeedInput, SourceSetPayload
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.kit.json_types import JsonObject
from app.kit.time import utcnow
from app.kit.v1_input import Cursor, validate

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
FEEDS = CONSOLE + "/feeds"
ITEMS_PER_PAGE = 50
FEEDS_PER_PAGE = 100
SOURCE_KINDS = (
    ("rss", "RSS or Atom URL"),
    ("board_feed", "Hacker News stories"),
    ("forum_community", "Subreddit"),
)


def source_body(form: PostedForm) -> JsonObject:
    """The source a form describes, as the API's JSON would carry it."""
    kind = form.text("source_kind")
    if kind == "board_feed":
        spec = {"kind": kind, "feed": form.text("hn_feed") or "new", "query": form.text("hn_query")}
    elif kind == "forum_community":
        spec = {"kind": kind, "community": form.text("community")}
    else:
        spec = {"kind": "rss", "url": form.text("url")}
    return {"spec": spec}


def _new_feed_page(me: ConsoleUser, form: PostedForm | None, **context: Any) -> Response:
    values = {name: form.text(name) if form else "" for name in ("name", "url", "hn_query", "community")}
    values["source_kind"] = form.text("source_kind") if form else "rss"
    values["hn_feed"] = form.text("hn_feed") if form else "new"
    values["poll_interval_seconds"] = (form.text("poll_interval_seconds") if form else "") or "300"
    context.setdefault("errors", [])
    context.setdefault("preview", None)
    return me.page("feeds/new.html", section="feeds", values=values, kinds=SOURCE_KINDS, **context)


@router.get(FEEDS)
def feeds_page(me: ConsoleUser, after: str | None = None) -> Response:
    page = feed_service.feeds_overview(me.db, me.account_id, Cursor(FEEDS_PER_PAGE, after))
    return me.page("feeds/list.html", section="feeds", feeds=page.items, next_cursor=page.next_cursor)


@router.get(FEEDS + "/new")
def new_feed_page(me: ConsoleUser) -> Response:
    return _new_feed_page(me, None)


@router.post(FEEDS + "/new")
def create_feed_submit(me: ConsoleUser, form: PostedForm, settings: SettingsDep) -> Response:
    body = {
        "name": form.text("name"),
        "poll_interval_seconds": form.text("poll_interval_seconds") or "300",
        "sources": [source_body(form)],
    }
    dry_run = form.text("action") == "preview"
    try:
        created = feed_service.create_feed(
            me.db,
            me.principal,
            validate(FeedInput, body),
            dry_run=dry_run,
            allow_private=settings.outbound_allow_private,
            now=utcnow(),
        )
    except DomainError as refused:
        return _new_feed_page(me, form, errors=messages_of(refused), status=400)
    if dry_run:
        return _new_feed_page(me, form, preview=created)
    return me.redirect(f"{FEEDS}/{created.id}")


@router.get(FEEDS + "/{feed_id}")
def feed_page(feed_id: str, me: ConsoleUser, after: str | None = None) -> Response:
    return _feed_page(me, feed_id, after)


def _feed_page(
    me: ConsoleUser, feed_id: str, after: str | None = None, *, errors: list[str] | None = None
) -> Response:
    feed = feed_service.read_feed(me.db, me.account_id, feed_id)
    items = item_page(me.db, me.account_id, feed_id, Cursor(ITEMS_PER_PAGE, after))
    return me.page(
        "feeds/feed.html",
        section="feeds",
        status=400 if errors else 200,
        feed=feed,
        items=[item_view(item) for item in items.items],
        next_cursor=items.next_cursor,
        kinds=SOURCE_KINDS,
        errors=errors or [],
    )


@router.post(FEEDS + "/{feed_id}/edit")
def edit_feed_submit(feed_id: str, me: ConsoleUser, form: PostedForm, settings: SettingsDep) -> Response:
    feed = feed_service.read_feed(me.db, me.account_id, feed_id)
    body = {
        "name": form.text("name"),
        "kind": feed.kind,
        "is_active": feed.is_active,
        "poll_interval_seconds": form.text("poll_interval_seconds"),
        "data": {**feed.data.model_dump(), "retention_days": form.text("retention_days")},
    }
    try:
        feed_service.edit_feed(
            me.db,
            me.principal,
            feed_id,
            validate(FeedEdit, body),
            dry_run=False,
            allow_private=settings.outbound_allow_private,
            now=utcnow(),
            min_poll_seconds=settings.feed_min_poll_seconds,
        )
    except DomainError as refused:
        if refused.status == 404:
            raise
        return _feed_page(me, feed_id, errors=messages_of(refused))
    return me.redirect(f"{FEEDS}/{feed_id}")


@router.post(FEEDS + "/{feed_id}/active")
def set_active_submit(feed_id: str, me: ConsoleUser, form: PostedForm, settings: SettingsDep) -> Response:
    feed_service.set_active(
        me.db,
        me.principal,
        feed_id,
        form.text("is_active") == "true",
        dry_run=False,
        now=utcnow(),
        min_poll_seconds=settings.feed_min_poll_seconds,
    )
    return me.redirect(f"{FEEDS}/{feed_id}")


@router.post(FEEDS + "/{feed_id}/delete")
def delete_feed_submit(feed_id: str, me: ConsoleUser) -> Response:
    feed_service.delete_feed(me.db, me.principal, feed_id, dry_run=False)
    return me.redirect(FEEDS)


def _replace_sources(
    me: ConsoleUser, feed_id: str, sources: list[dict[str, Any]], settings: SettingsDep
) -> Response:
    try:
        feed_service.set_feed_sources(
            me.db,
            me.principal,
            feed_id,
            validate(SourceSetPayload, {"sources": sources}).sources,
            dry_run=False,
            allow_private=settings.outbound_allow_private,
            now=utcnow(),
        )
    except DomainError as refused:
        if refused.status == 404:
            raise
        return _feed_page(me, feed_id, errors=messages_of(refused))
    return me.redirect(f"{FEEDS}/{feed_id}")


@router.post(FEEDS + "/{feed_id}/sources")
def add_source_submit(feed_id: str, me: ConsoleUser, form: PostedForm, settings: SettingsDep) -> Response:
    existing = [s.model_dump() for s in feed_service.list_sources(me.db, me.account_id, feed_id).sources]
    return _replace_sources(me, feed_id, [*existing, source_body(form)], settings)


@router.post(FEEDS + "/{feed_id}/sources/{source_id}/remove")
def remove_source_submit(feed_id: str, source_id: str, me: ConsoleUser, settings: SettingsDep) -> Response:
    existing = feed_service.list_sources(me.db, me.account_id, feed_id).sources
    kept = [s.model_dump() for s in existing if s.id != source_id]
    return _replace_sources(me, feed_id, kept, settings)
