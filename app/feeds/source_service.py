"""A feed's sources: checking them, and replacing a feed's set by diff.

A source's identity within its feed is its spec (hashed canonically), so replacing a set keeps every
source whose spec is in both sets (its id, watermark and polling state with it), adds the new ones and
removes the rest. A kept source takes the new `meta` and `field_map`; its `last_event_at` is its
watermark and is not reset by a re-import.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.feeds.poll_queue import retention_start
from app.feeds.specs import CLOCK_SKEW, SourceInput, spec_hash
from app.feeds.wire import SourceSeekResult, SourceSetResult, SourceWire, source_wire
from app.kit.errors import NotFound
from app.kit.ids import new_ulid, normalize_ulid
from app.kit.safe_http import literal_host_problem
from app.kit.v1_input import invalid
from app.kit.windows import resolve_moment
from app.models import Feed, Source

log = logging.getLogger("tidings.feeds")


def check_sources(inputs: list[SourceInput], *, allow_private: bool, prefix: str = "sources") -> None:
    """Refuse, before anything is stored, an RSS URL that names a non-public address (a literal IP or
    localhost); names that only resolve to one are refused when fetched."""
    errors: dict[str, list[str]] = {}
    for index, item in enumerate(inputs):
        url = getattr(item.spec, "url", None)
        if url is None:
            continue
        problem = literal_host_problem(url, allow_private=allow_private)
        if problem is not None:
            errors[f"{prefix}[{index}].spec.url"] = [f"The URL {problem}."]
    if errors:
        raise invalid(errors)


def unique_inputs(inputs: list[SourceInput]) -> dict[str, SourceInput]:
    """By spec hash, in order; a repeated spec keeps its first occurrence."""
    by_hash: dict[str, SourceInput] = {}
    for item in inputs:
        key = spec_hash(item.spec)
        if key in by_hash:
            log.info("duplicate source %r in one set: the first occurrence is kept", item.spec.display())
            continue
        by_hash[key] = item
    return by_hash


def new_source(feed_id: str, account_id: int, key: str, item: SourceInput, now: datetime) -> Source:
    start = item.last_event_at or now
    return Source(
        id=new_ulid(),
        account_id=account_id,
        feed_id=feed_id,
        kind=item.spec.kind,
        spec=item.spec.model_dump(mode="json"),
        spec_hash=key,
        display=item.spec.display(),
        meta=dict(item.meta),
        field_map=dict(item.field_map),
        start_at=start,
        last_event_at=start,
        consecutive_failures=0,
        created_at=now,
        updated_at=now,
    )


def preview_wire(item: SourceInput, now: datetime) -> SourceWire:
    """What a source that a dry run would add looks like (no id yet)."""
    return SourceWire(
        id="",
        spec=item.spec,
        display=item.spec.display(),
        meta=dict(item.meta),
        field_map=dict(item.field_map),
        last_event_at=item.last_event_at or now,
    )


def feed_sources(session: Session, feed_id: str) -> list[Source]:
    return list(session.scalars(select(Source).where(Source.feed_id == feed_id).order_by(Source.id)))


def sources_of_feeds(session: Session, feed_ids: list[str]) -> dict[str, list[Source]]:
    """The sources of several feeds (a page of the feed list) in one query."""
    found: dict[str, list[Source]] = {feed_id: [] for feed_id in feed_ids}
    if feed_ids:
        query = select(Source).where(Source.feed_id.in_(feed_ids)).order_by(Source.id)
        for source in session.scalars(query):
            found[source.feed_id].append(source)
    return found


def preview_set(existing: list[Source], inputs: list[SourceInput], now: datetime) -> list[SourceWire]:
    """The source wires a replacement would leave, computed without changing anything."""
    by_hash = {source.spec_hash: source for source in existing}
    kept: list[SourceWire] = []
    added: list[SourceWire] = []
    for key, item in unique_inputs(inputs).items():
        source = by_hash.get(key)
        if source is None:
            added.append(preview_wire(item, now))
        else:
            changes = {"meta": dict(item.meta), "field_map": dict(item.field_map)}
            kept.append(source_wire(source).model_copy(update=changes))
    kept.sort(key=lambda wire: wire.id)
    return kept + added


def replace_sources(
    session: Session, feed: Feed, inputs: list[SourceInput], *, dry_run: bool, now: datetime
) -> SourceSetResult:
    """Make the feed's sources `inputs`, by diff. The caller holds the feed row locked."""
    wanted = unique_inputs(inputs)
    existing = {source.spec_hash: source for source in feed_sources(session, feed.id)}
    added = [key for key in wanted if key not in existing]
    removed = [source.id for key, source in existing.items() if key not in wanted]
    kept = [key for key in wanted if key in existing]
    counts = SourceSetResult(
        added=len(added), removed=len(removed), persisted=len(kept), source_count=len(wanted)
    )
    if dry_run:
        return counts
    if removed:
        session.execute(delete(Source).where(Source.id.in_(removed)))
    for key in kept:
        source, item = existing[key], wanted[key]
        if source.meta != item.meta or source.field_map != item.field_map:
            source.meta = dict(item.meta)
            source.field_map = dict(item.field_map)
            source.updated_at = now
    # Made in input order: ids (ULIDs) then list the sources as they were given.
    session.add_all(new_source(feed.id, feed.account_id, key, wanted[key], now) for key in added)
    session.flush()
    return counts


def find_source(session: Session, account_id: int, source_id: str) -> Source:
    """The account's source by its own id, or 404 (another account's is indistinguishable from none)."""
    canonical = normalize_ulid(source_id)
    source = (
        session.scalars(select(Source).where(Source.id == canonical, Source.account_id == account_id)).first()
        if canonical is not None
        else None
    )
    if source is None:
        raise NotFound(f"No source {source_id}.")
    return source


def seek(
    session: Session, feed: Feed, sources: list[Source], raw_to: str, *, dry_run: bool, now: datetime
) -> SourceSeekResult:
    """Moves the watermark of `sources` (of `feed`) to `raw_to` (app/kit/windows' grammar; `oldest` is
    the feed's retention start). The next poll collects from there: a rewound source fetches again
    what it already passed (stored items are deduplicated, unseen ones are new), an advanced one skips
    what it had not fetched yet. Neither the future nor a moment before the retention window (whose
    items were pruned and would come back as new) is a target."""
    floor = retention_start(now, feed.retention_days)
    try:
        target = resolve_moment(raw_to, now=now, floor=floor)
    except ValueError as exc:
        raise invalid({"to": [str(exc)]}) from None
    if target > now + CLOCK_SKEW:
        raise invalid({"to": ["Must not be in the future."]})
    if target < floor:
        raise invalid(
            {"to": [f"Must not be before the feed's retention window ({feed.retention_days} days)."]}
        )
    target = min(target, now)
    advanced = [s for s in sources if s.last_event_at is None or s.last_event_at < target]
    rewound = [s for s in sources if s.last_event_at is not None and s.last_event_at > target]
    counts = SourceSeekResult(
        advanced=len(advanced),
        rewound=len(rewound),
        unchanged=len(sources) - len(advanced) - len(rewound),
        source_count=len(sources),
        to=target,
        dry_run=dry_run,
    )
    if dry_run or not (advanced or rewound):
        return counts
    for source in advanced + rewound:
        # Both: the poll's lower bound is the later of the two (app/feeds/poll_queue.lower_bound).
        source.start_at = target
        source.last_event_at = target
        source.updated_at = now
    if feed.is_active:
        feed.next_poll_at = min(feed.next_poll_at or now, now)
    session.flush()
    return counts
