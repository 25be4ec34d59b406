"""The polling queue: feeds are its rows. Claim the due ones under a lease, record what a poll found,
back off what failed, prune what retention let go. Each function is one short transaction's work run
by a worker (`db.transaction`); none does network I/O.

A feed is due when it is active, `next_poll_at` has come and no live lease holds it. A claim takes due
feeds with `FOR UPDATE SKIP LOCKED` (SQLite has one writer anyway), stamps `lease_until` and a
`lease_token`, and commits: from then on no other worker claims the feed until the lease ends, and a
worker that records after losing its lease (it took longer than the lease) records nothing.

What follows from new items is not the feed side's business: recording a poll hands their ids to
the `OnNewItems` hook it is given, in the same transaction; app/scheduler.py gives the watch run
queue's.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import (
    DateTime,
    Integer,
    String,
    Text,
    bindparam,
    cast,
    column,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from app.db import among, skip_locked, upsert
from app.feeds.connectors.base import ConnectorError, Fetched, Observation, SourceJob
from app.kit.ids import new_ulid, ulid_floor
from app.models import Feed, FeedItem, Source

# API connectors look back this far behind their watermark, for items their index saw late; the
# store drops the repeats.
LOOKBACK = timedelta(hours=1)
# A failing source waits its feed's interval times 2^failures, at most this long (or the interval).
MAX_BACKOFF = timedelta(hours=6)
UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Told, in the recording transaction (it only flushes), the ids of the items a poll stored (maybe none)
# and the poll's moment; what it returns is ignored.
OnNewItems = Callable[[Session, Sequence[str], datetime], object]


@dataclass(frozen=True, slots=True)
class ClaimedFeed:
    feed_id: str
    account_id: int
    lease_token: str
    # The feed's own interval raised to the operator's floor: what this poll schedules the next by.
    poll_interval_seconds: int
    retention_days: int
    jobs: list[SourceJob]


@dataclass(slots=True)
class SourceOutcome:
    job: SourceJob
    fetched: Fetched | None = None
    error: ConnectorError | None = None


@dataclass(slots=True)
class FeedPollResult:
    claim: ClaimedFeed
    outcomes: list[SourceOutcome] = field(default_factory=list)


def retention_start(now: datetime, retention_days: int) -> datetime:
    """The moment `retention_days` before `now`: year 1 when that is earlier still (a retention of
    millions of days is a client's choice, and must not overflow the date arithmetic)."""
    earliest = datetime.min.replace(tzinfo=now.tzinfo)
    if retention_days >= (now - earliest).days:
        return earliest
    return now - timedelta(days=retention_days)


def lower_bound(source: Source, retention_days: int, now: datetime) -> datetime:
    """The moment after which a source's items are wanted in this poll."""
    bound = max(source.start_at, retention_start(now, retention_days))
    # RSS re-reads the whole document each time and the store drops repeats: no watermark needed.
    # Compared before subtracting: a backfill from year 1 has no moment LOOKBACK before it.
    if source.kind != "rss" and source.last_event_at is not None and source.last_event_at > bound + LOOKBACK:
        bound = source.last_event_at - LOOKBACK
    return bound


def claim_due_feeds(
    session: Session, now: datetime, limit: int, lease: timedelta, *, min_interval_seconds: int = 0
) -> list[ClaimedFeed]:
    """Claim up to `limit` due feeds under `lease`. Each claim's interval is the feed's own raised to
    `min_interval_seconds` (the operator's TIDINGS_FEED_MIN_POLL_SECONDS): the next poll and any
    backoff are counted from it."""
    rows = session.execute(
        select(
            Feed.id, Feed.account_id, Feed.poll_interval_seconds, Feed.retention_days, Feed.default_field_map
        )
        .where(
            Feed.is_active.is_(True),
            Feed.next_poll_at <= now,
            or_(Feed.lease_until.is_(None), Feed.lease_until <= now),
        )
        .order_by(Feed.next_poll_at)
        .limit(limit)
        .with_for_update(**skip_locked(session))
    ).all()
    if not rows:
        return []
    tokens = {row.id: secrets.token_hex(16) for row in rows}
    for feed_id, token in tokens.items():
        session.execute(
            update(Feed).where(Feed.id == feed_id).values(lease_until=now + lease, lease_token=token)
        )
    sources: dict[str, list[Source]] = {}
    for source in session.scalars(
        select(Source)
        .where(
            among(session, Source.feed_id, list(tokens), String()),
            or_(Source.retry_at.is_(None), Source.retry_at <= now),
        )
        .order_by(Source.id)
    ):
        sources.setdefault(source.feed_id, []).append(source)
    claimed = []
    for row in rows:
        default_map: dict[str, str] = row.default_field_map or {}
        jobs = [
            SourceJob(
                source_id=source.id,
                kind=source.kind,
                spec=source.spec,
                display=source.display,
                field_map={**default_map, **(source.field_map or {})},
                meta=source.meta or {},
                since=lower_bound(source, row.retention_days, now),
                etag=source.etag,
                last_modified=source.last_modified,
            )
            for source in sources.get(row.id, [])
        ]
        claimed.append(
            ClaimedFeed(
                row.id,
                row.account_id,
                tokens[row.id],
                max(row.poll_interval_seconds, min_interval_seconds),
                row.retention_days,
                jobs,
            )
        )
    return claimed


def backoff(failures: int, interval_seconds: int, retry_after: float | None) -> timedelta:
    # In whole seconds: an interval of 2^31 s times 2^20 is past what a timedelta holds.
    growth: int = 2 ** min(failures, 20)
    cap = max(int(MAX_BACKOFF.total_seconds()), interval_seconds)
    delay = timedelta(seconds=min(interval_seconds * growth, cap))
    if retry_after is not None:
        # The upstream's own word may make the wait longer, never shorter.
        delay = max(delay, timedelta(seconds=min(retry_after, 7 * 24 * 3600)))
    return delay


def _unseen_undated(source: Source, fetched: Fetched) -> list[Observation]:
    """The document's entries less the undated ones it already listed last time, and the source's memory
    of its undated entries replaced by this document's. An undated entry has no date to hold against
    the watermark, so "new" means "not in the previous document": one that retention pruned while the
    feed still lists it stays old, and the first document (live mode: entries that were there before
    the source) yields none. Call it before the poll marks the source polled."""
    digests = {o.external_id: _digest(o.external_id) for o in fetched.observations if o.occurred_at is None}
    seen_before = set(source.undated_seen or ())
    first_poll = source.last_polled_at is None
    listed = list(digests.values())
    if listed != source.undated_seen:
        source.undated_seen = listed
    return [
        o
        for o in fetched.observations
        if o.occurred_at is not None or not (first_poll or digests[o.external_id] in seen_before)
    ]


def _digest(external_id: str) -> str:
    # 16 hex digits a remembered id, whatever the id's length (up to 500 characters): a feed's few
    # hundred undated entries stay a few kilobytes on the source row.
    return hashlib.blake2b(external_id.encode(), digest_size=8).hexdigest()


def _item_rows(claim: ClaimedFeed, job: SourceJob, observations: list[Observation]) -> list[dict[str, Any]]:
    # Oldest first, each a fresh ULID: the item log (by id, descending) then reads newest first.
    rows = []
    for observation in observations:
        data = observation.data
        if job.meta:
            data = {**data, "meta": dict(job.meta)}
        rows.append(
            {
                "id": new_ulid(),
                "account_id": claim.account_id,
                "feed_id": claim.feed_id,
                "source_id": job.source_id,
                "source_kind": job.kind,
                "source_label": job.display,
                "external_id": observation.external_id,
                "occurred_at": observation.occurred_at,
                "data": data,
            }
        )
    return rows


def record_polls(
    session: Session, results: Sequence[FeedPollResult], now: datetime, *, on_new_items: OnNewItems
) -> int:
    """Store several polls' items and states in one go (one INSERT for all their items), then tell
    `on_new_items` the new ones' ids; returns how many items were new. A poll whose feed was deleted,
    or whose lease another worker holds now, is dropped."""
    tokens = {result.claim.feed_id: result.claim.lease_token for result in results}
    feeds = {
        feed.id: feed
        for feed in session.scalars(
            select(Feed)
            .where(among(session, Feed.id, list(tokens), String()))
            .order_by(Feed.id)
            .with_for_update()
        )
        if feed.lease_token == tokens[feed.id]
    }
    job_ids = [outcome.job.source_id for result in results for outcome in result.outcomes]
    sources = select(Source).where(among(session, Source.id, job_ids, String()))
    live = {source.id: source for source in session.scalars(sources)}
    rows: list[dict[str, Any]] = []
    for result in results:
        feed = feeds.get(result.claim.feed_id)
        if feed is not None:
            rows.extend(_apply_poll(feed, result, live, now))
    new_ids = insert_items(session, rows)
    # Before pruning, in this transaction: what the hook adds commits with the items or not at all.
    on_new_items(session, new_ids, now)
    by_retention: dict[int, list[str]] = {}
    for feed in feeds.values():
        by_retention.setdefault(feed.retention_days, []).append(feed.id)
    for retention_days, feed_ids in by_retention.items():
        prune_feeds(session, feed_ids, retention_days, now)
    return len(new_ids)


def _apply_poll(
    feed: Feed, result: FeedPollResult, live: dict[str, Source], now: datetime
) -> list[dict[str, Any]]:
    """Update the feed and its sources from one poll; returns the item rows to store."""
    claim = result.claim
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    succeeded = 0
    for outcome in result.outcomes:
        source = live.get(outcome.job.source_id)
        if source is None or source.feed_id != claim.feed_id:
            continue  # removed from the feed while it was being polled
        if outcome.error is not None:
            source.consecutive_failures += 1
            source.last_error = outcome.error.message[:2000]
            source.retry_at = now + backoff(
                source.consecutive_failures, claim.poll_interval_seconds, outcome.error.retry_after
            )
            errors.append(f"{source.display}: {outcome.error.message}")
            continue
        fetched = outcome.fetched or Fetched()
        observations = fetched.observations if fetched.not_modified else _unseen_undated(source, fetched)
        succeeded += 1
        if source.consecutive_failures:
            source.consecutive_failures = 0
            source.last_error = None
            source.retry_at = None
        source.last_polled_at = now
        if source.etag != fetched.etag or source.last_modified != fetched.last_modified:
            source.etag = fetched.etag
            source.last_modified = fetched.last_modified
        newest = max((o.occurred_at for o in fetched.observations if o.occurred_at), default=None)
        if newest is not None:
            newest = min(newest, now)
            if source.last_event_at is None or newest > source.last_event_at:
                source.last_event_at = newest
        rows.extend(_item_rows(claim, outcome.job, observations))
    feed.last_polled_at = now
    feed.lease_until = None
    feed.lease_token = None
    if errors:
        feed.consecutive_failures += 1
        feed.last_error = "; ".join(errors)[:4000]
    elif feed.consecutive_failures or feed.last_error is not None:
        feed.consecutive_failures = 0
        feed.last_error = None
    feed.next_poll_at = now + timedelta(seconds=claim.poll_interval_seconds)
    if errors and not succeeded:
        # Nothing worked: the feed comes back when its first source's backoff ends.
        waits = [s.retry_at for s in live.values() if s.retry_at is not None and s.feed_id == feed.id]
        if waits:
            feed.next_poll_at = max(feed.next_poll_at, min(waits))
    return rows


_ITEM_COLUMNS = [
    "id",
    "account_id",
    "feed_id",
    "source_id",
    "source_kind",
    "source_label",
    "external_id",
    "occurred_at",
    "data",
]


def _recordset_items(rows: Sequence[dict[str, Any]]) -> Any:
    """PostgreSQL: the rows as one JSON document turned back into rows by the server
    (jsonb_to_recordset). One parameter, made by orjson, instead of nine escaped arrays or a VALUES
    list of 450 parameters that psycopg would parse anew for every statement."""
    document = orjson.dumps(
        [
            {
                **row,
                "occurred_at": row["occurred_at"].astimezone(UTC).replace(tzinfo=None)
                if row["occurred_at"]
                else None,
            }
            for row in rows
        ]
    ).decode()
    recordset = (
        func.jsonb_to_recordset(cast(bindparam(None, document, type_=Text), postgresql.JSONB))
        .table_valued(
            column("id", String),
            column("account_id", Integer),
            column("feed_id", String),
            column("source_id", String),
            column("source_kind", String),
            column("source_label", String),
            column("external_id", String),
            column("occurred_at", DateTime),
            column("data", postgresql.JSONB),
        )
        .render_derived(with_types=True)
    )
    return select(*(recordset.c[name] for name in _ITEM_COLUMNS))


def insert_items(session: Session, rows: Sequence[dict[str, Any]]) -> list[str]:
    """One INSERT for all rows that skips items a source already yielded; returns the new items' ids."""
    if not rows:
        return []
    statement = upsert(session, FeedItem)
    if session.get_bind().dialect.name == "postgresql":
        statement = statement.from_select(_ITEM_COLUMNS, _recordset_items(rows))
        done = statement.on_conflict_do_nothing(index_elements=["source_id", "external_id"]).returning(
            FeedItem.id
        )
        return list(session.scalars(done))
    # SQLite: SQLAlchemy sends the rows as multi-row batches within its parameter limit.
    done = statement.on_conflict_do_nothing(index_elements=["source_id", "external_id"]).returning(
        FeedItem.id
    )
    return list(session.scalars(done, list(rows)))


def release_lease(session: Session, claim: ClaimedFeed, now: datetime) -> None:
    """A poll that could not even run (the worker is stopping): the feed is due again at once."""
    session.execute(
        update(Feed)
        .where(Feed.id == claim.feed_id, Feed.lease_token == claim.lease_token)
        .values(lease_until=None, lease_token=None)
    )


def prune_feeds(session: Session, feed_ids: Sequence[str], retention_days: int, now: datetime) -> int:
    """Items stored more than retention_days ago go (ids are ULIDs: their time is their store time)."""
    start = retention_start(now, retention_days)
    if start <= UNIX_EPOCH.replace(tzinfo=start.tzinfo):
        return 0  # no ULID is older than the Unix epoch
    cutoff = ulid_floor(start)
    result = session.execute(delete(FeedItem).where(FeedItem.feed_id.in_(feed_ids), FeedItem.id < cutoff))
    return int(getattr(result, "rowcount", 0) or 0)


def prune_all(session: Session, now: datetime) -> int:
    """Retention for every feed, active or not (paused feeds are not polled, so not pruned there)."""
    by_retention: dict[int, list[str]] = {}
    for feed_id, retention_days in session.execute(select(Feed.id, Feed.retention_days)).all():
        by_retention.setdefault(retention_days, []).append(feed_id)
    return sum(prune_feeds(session, ids, days, now) for days, ids in by_retention.items())
