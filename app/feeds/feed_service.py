"""The rules of feeds: listing, reading, creating, editing, pausing and deleting, each with a dry run
that validates everything and stores nothing."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.feeds.source_service import (
    check_sources,
    feed_sources,
    find_source,
    preview_set,
    preview_wire,
    replace_sources,
    seek,
    sources_of_feeds,
    unique_inputs,
)
from app.feeds.specs import FeedFields, FeedInput, SourceInput
from app.feeds.wire import (
    FeedListResponse,
    FeedMutationResponse,
    FeedOverview,
    FeedOverviewPage,
    FeedView,
    SourceSeekResult,
    SourceSetOut,
    SourceSetResult,
    SourceWire,
    feed_wire,
    feed_with_sources_wire,
    source_wire,
)
from app.identity.principal import Principal
from app.kit.errors import Conflict, NotFound
from app.kit.ids import new_ulid, normalize_ulid
from app.kit.v1_input import Cursor
from app.models import Feed, FeedItem, Source


def list_feeds(session: Session, account_id: int, cursor: Cursor) -> FeedListResponse:
    """The account's feeds, newest first, `cursor.limit` at a time."""
    query = select(Feed).where(Feed.account_id == account_id)
    if cursor.after is not None:
        query = query.where(Feed.id < cursor.after)
    rows = list(session.scalars(query.order_by(Feed.id.desc()).limit(cursor.limit)))
    next_cursor = rows[-1].id if len(rows) == cursor.limit else None
    return FeedListResponse(items=[feed_wire(feed) for feed in rows], next_cursor=next_cursor)


def feeds_overview(session: Session, account_id: int, cursor: Cursor) -> FeedOverviewPage:
    """A page of the account's feeds (as `list_feeds`), each with its sources and how many items it
    holds: the console's feed list, in three queries whatever the page's size."""
    page = list_feeds(session, account_id, cursor)
    ids = [feed.id for feed in page.items]
    sources = sources_of_feeds(session, ids)
    counts = dict.fromkeys(ids, 0)
    if ids:
        query = (
            select(FeedItem.feed_id, func.count()).where(FeedItem.feed_id.in_(ids)).group_by(FeedItem.feed_id)
        )
        counts.update({feed_id: int(count) for feed_id, count in session.execute(query).all()})
    items = [
        FeedOverview(
            **dict(feed), sources=[source_wire(s) for s in sources[feed.id]], item_count=counts[feed.id]
        )
        for feed in page.items
    ]
    return FeedOverviewPage(items=items, next_cursor=page.next_cursor)


def find_feed(session: Session, account_id: int, feed_id: str, *, lock: bool = False) -> Feed:
    """The account's feed, or 404 (another account's feed is indistinguishable from none)."""
    canonical = normalize_ulid(feed_id)
    if canonical is None:
        raise NotFound(f"No feed {feed_id}.")
    query = select(Feed).where(Feed.id == canonical, Feed.account_id == account_id)
    if lock:
        query = query.with_for_update()
    feed = session.scalars(query).first()
    if feed is None:
        raise NotFound(f"No feed {feed_id}.")
    return feed


def read_feed(session: Session, account_id: int, feed_id: str) -> FeedView:
    feed = find_feed(session, account_id, feed_id)
    return feed_with_sources_wire(feed, feed_sources(session, feed.id))


def _settings_of(body: FeedFields) -> dict[str, Any]:
    return {
        "name": body.name,
        "kind": body.kind,
        "is_active": body.is_active,
        "poll_interval_seconds": body.poll_interval_seconds,
        "retention_days": body.data.retention_days,
        "default_field_map": dict(body.data.default_field_map),
    }


def create_feed(
    session: Session,
    principal: Principal,
    body: FeedInput,
    *,
    dry_run: bool,
    allow_private: bool,
    now: datetime,
) -> FeedMutationResponse:
    inputs = body.sources or []
    check_sources(inputs, allow_private=allow_private)
    if dry_run:
        previews = [preview_wire(item, now) for item in unique_inputs(inputs).values()]
        return FeedMutationResponse(
            id=None,
            name=body.name,
            kind=body.kind,
            is_active=body.is_active,
            poll_interval_seconds=body.poll_interval_seconds,
            user_id=str(principal.user.id),
            data=body.data,
            source_count=len(previews),
            sources=previews,
            dry_run=True,
        )
    feed = Feed(
        id=new_ulid(),
        account_id=principal.account.id,
        user_id=principal.user.id,
        **_settings_of(body),
        # A new active feed is due at once: its first poll primes the sources (live mode from now).
        next_poll_at=now if body.is_active else None,
        consecutive_failures=0,
        created_at=now,
        updated_at=now,
    )
    session.add(feed)
    session.flush()
    if inputs:
        replace_sources(session, feed, inputs, dry_run=False, now=now)
    return _mutation(feed_with_sources_wire(feed, feed_sources(session, feed.id)), dry_run=False)


def _mutation(view: FeedView, *, dry_run: bool) -> FeedMutationResponse:
    return FeedMutationResponse(**dict(view), dry_run=dry_run)


def _preview(feed: Feed, sources: list[SourceWire], changes: dict[str, Any]) -> FeedMutationResponse:
    """A dry run's answer: the feed as it stands with `changes` made, and the sources it would have."""
    wire = feed_wire(feed).model_copy(update=changes)
    return FeedMutationResponse(**dict(wire), source_count=len(sources), sources=sources, dry_run=True)


def _next_poll(feed: Feed, now: datetime, min_poll_seconds: int) -> datetime | None:
    """When an edited or resumed feed is due: by its interval (raised to the operator's floor, as the
    poller schedules it) from its last poll, never in the past; a feed backing off after failures
    keeps its later time."""
    if not feed.is_active:
        return None
    if feed.consecutive_failures and feed.next_poll_at is not None and feed.next_poll_at > now:
        return feed.next_poll_at
    if feed.last_polled_at is None:
        return now
    interval = max(feed.poll_interval_seconds, min_poll_seconds)
    return max(now, feed.last_polled_at + timedelta(seconds=interval))


def edit_feed(
    session: Session,
    principal: Principal,
    feed_id: str,
    body: FeedFields,
    *,
    dry_run: bool,
    allow_private: bool,
    now: datetime,
    min_poll_seconds: int,
) -> FeedMutationResponse:
    feed = find_feed(session, principal.account.id, feed_id, lock=not dry_run)
    if body.kind != feed.kind:
        raise Conflict(f"A feed's kind cannot change (it is {feed.kind!r}).", code="kind_immutable")
    # Empty is absent: openmagpie's CLI sends `"sources": []` with every edit and means "no change"
    # (removing every source is `PUT /v1/feeds/{id}/sources` with an empty set).
    replacement = body.sources or None
    if replacement is not None:
        check_sources(replacement, allow_private=allow_private)
    existing = feed_sources(session, feed.id)
    settings = _settings_of(body)
    if dry_run:
        sources = (
            [source_wire(source) for source in existing]
            if replacement is None
            else preview_set(existing, replacement, now)
        )
        edited = {
            "name": body.name,
            "is_active": body.is_active,
            "poll_interval_seconds": body.poll_interval_seconds,
            "data": body.data,
        }
        return _preview(feed, sources, edited)
    for name, value in settings.items():
        setattr(feed, name, value)
    counts = (
        replace_sources(session, feed, replacement, dry_run=False, now=now)
        if replacement is not None
        else None
    )
    feed.next_poll_at = (
        now if feed.is_active and counts and counts.added else _next_poll(feed, now, min_poll_seconds)
    )
    feed.updated_at = now
    session.flush()
    return _mutation(feed_with_sources_wire(feed, feed_sources(session, feed.id)), dry_run=False)


def set_active(
    session: Session,
    principal: Principal,
    feed_id: str,
    is_active: bool,
    *,
    dry_run: bool,
    now: datetime,
    min_poll_seconds: int,
) -> FeedMutationResponse:
    feed = find_feed(session, principal.account.id, feed_id, lock=not dry_run)
    sources = feed_sources(session, feed.id)
    if dry_run:
        return _preview(feed, [source_wire(s) for s in sources], {"is_active": is_active})
    if feed.is_active != is_active:
        feed.is_active = is_active
        feed.next_poll_at = _next_poll(feed, now, min_poll_seconds)
        feed.updated_at = now
        session.flush()
    return _mutation(feed_with_sources_wire(feed, sources), dry_run=False)


def delete_feed(
    session: Session, principal: Principal, feed_id: str, *, dry_run: bool
) -> FeedMutationResponse | None:
    """Deletes the feed with its sources and items; a dry run returns what would be deleted."""
    feed = find_feed(session, principal.account.id, feed_id)
    if dry_run:
        return _mutation(feed_with_sources_wire(feed, feed_sources(session, feed.id)), dry_run=True)
    session.execute(delete(Feed).where(Feed.id == feed.id))
    return None


def set_feed_sources(
    session: Session,
    principal: Principal,
    feed_id: str,
    inputs: list[SourceInput],
    *,
    dry_run: bool,
    allow_private: bool,
    now: datetime,
) -> SourceSetResult:
    # The row lock serialises two replacements of one feed's set: each diffs against the other's result.
    feed = find_feed(session, principal.account.id, feed_id, lock=not dry_run)
    check_sources(inputs, allow_private=allow_private)
    counts = replace_sources(session, feed, inputs, dry_run=dry_run, now=now)
    if not dry_run and counts.added and feed.is_active:
        # New sources (a backfill, say) are fetched at once rather than at the next interval.
        feed.next_poll_at = min(feed.next_poll_at or now, now)
        session.flush()
    return counts


def list_sources(session: Session, account_id: int, feed_id: str) -> SourceSetOut:
    feed = find_feed(session, account_id, feed_id)
    sources = [source_wire(s) for s in feed_sources(session, feed.id)]
    # `items` is the same list under the name openmagpie's server and CLI use for it.
    return SourceSetOut(sources=sources, items=sources)


def read_source(session: Session, account_id: int, source_id: str) -> SourceWire:
    return source_wire(find_source(session, account_id, source_id))


def seek_feed_sources(
    session: Session, account_id: int, feed_id: str, raw_to: str, *, dry_run: bool, now: datetime
) -> SourceSeekResult:
    """Every source of the feed to `raw_to` (source_service.seek)."""
    feed = find_feed(session, account_id, feed_id, lock=not dry_run)
    return seek(session, feed, feed_sources(session, feed.id), raw_to, dry_run=dry_run, now=now)


def seek_one_source(
    session: Session, account_id: int, source_id: str, raw_to: str, *, dry_run: bool, now: datetime
) -> SourceSeekResult:
    source = find_source(session, account_id, source_id)
    # The feed's row lock, as for a set: a seek and a replacement of the same sources take turns.
    feed = find_feed(session, account_id, source.feed_id, lock=not dry_run)
    return seek(session, feed, [source], raw_to, dry_run=dry_run, now=now)


def delete_source(session: Session, account_id: int, source_id: str) -> None:
    """Removes one source (its items stay, as when a set drops it)."""
    source = find_source(session, account_id, source_id)
    session.execute(delete(Source).where(Source.id == source.id))
