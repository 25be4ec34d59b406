"""The run queue: runs are its rows. Enqueue the first action's run for every new item of a subscribed
feed, claim due runs, record what the actions did (advancing the chain), and take back runs a dead
worker left running. Each function is one short transaction's work (`db.transaction`); none does
network I/O.

A run is due when it is `pending`, or `failed` with attempts left, and its `scheduled_at` has come. A
claim takes due runs with `FOR UPDATE SKIP LOCKED` (SQLite has one writer anyway), marks them
`running` and counts the attempt, and commits; the attempt number is the claim's fence: a worker
records a run only while it is still `running` at the attempt that worker started, so a run taken back
from a slow worker and claimed again is never recorded twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from typing import cast as cast_type

from sqlalchemy import (
    String,
    Table,
    Text,
    and_,
    bindparam,
    cast,
    exists,
    func,
    insert,
    literal,
    select,
    type_coerce,
    update,
)
from sqlalchemy.orm import Session, aliased

from app.db import among, skip_locked, upsert
from app.kit.ids import new_ulid
from app.models import (
    ActionKind,
    DeliveryState,
    FeedItem,
    RunState,
    Watch,
    WatchAction,
    WatchActionDelivery,
    WatchActionRun,
    WatchFeed,
)

# Core tables for the executemany UPDATEs (the ORM would read those as bulk updates by primary key).
RUNS = cast_type(Table, WatchActionRun.__table__)
DELIVERIES = cast_type(Table, WatchActionDelivery.__table__)

MAX_ATTEMPTS = 3
# After the first and the second failed attempt: all three within five minutes.
RETRY_DELAYS = (timedelta(seconds=10), timedelta(seconds=60))
QUEUED = (RunState.PENDING, RunState.FAILED)
PAUSED = "skipped: the watch is paused"


@dataclass(frozen=True, slots=True)
class ItemRow:
    source_kind: str
    external_id: str
    source_label: str
    occurred_at: datetime | None
    data: Any


@dataclass(slots=True)
class ClaimedRun:
    """A run a worker holds, with what its action needs (a snapshot taken at the claim)."""

    run_id: str
    attempt: int
    account_id: int
    watch_id: str
    watch_name: str
    action_id: str
    kind: ActionKind
    config: dict[str, Any]
    feed_item_id: str
    feed_id: str
    item: ItemRow | None
    # Digest actions: the window the run belongs to (start and end).
    window: tuple[datetime, datetime] | None = None


@dataclass(slots=True)
class Outcome:
    run: ClaimedRun
    state: RunState
    result: dict[str, Any] | None = None
    error: str = ""
    delivery_id: str | None = None


@dataclass(slots=True)
class DeliveryOutcome:
    delivery_id: str
    state: DeliveryState
    http_status: int | None
    error: str
    completed_at: datetime


@dataclass(slots=True)
class Claim:
    runs: list[ClaimedRun] = field(default_factory=list)
    skipped: int = 0
    parked: int = 0

    def __len__(self) -> int:
        return len(self.runs) + self.skipped + self.parked


# --- enqueue: the poller's hook ------------------------------------------------------------------------


def _run_id(session: Session) -> Any:
    """A ULID made by the database for a run of an item: the item's time part (when it was stored)
    and 16 random hex digits (hex digits are Crockford base32 digits too)."""
    if session.get_bind().dialect.name == "postgresql":
        digest = func.md5(cast(func.random(), Text).concat(FeedItem.id))
        random_part = func.upper(func.substr(digest, 1, 16), type_=String)
    else:
        random_part = func.hex(func.randomblob(8), type_=String)
    return type_coerce(func.substr(FeedItem.id, 1, 10, type_=String), String).concat(random_part)


def enqueue_first_runs(session: Session, item_ids: Sequence[str], now: datetime) -> int:
    """One INSERT ... SELECT: a pending run of the first action of every active watch subscribed to
    the feed of each new item. Items already run by an action are left alone (the unique key)."""
    if not item_ids:
        return 0
    # The first action: none of the watch's actions ranks before it (a seek on (watch_id, rank)).
    earlier = aliased(WatchAction)
    first = ~exists().where(earlier.watch_id == WatchAction.watch_id, earlier.rank < WatchAction.rank)
    rows = (
        select(
            _run_id(session),
            Watch.account_id,
            Watch.id,
            WatchAction.id,
            FeedItem.id,
            FeedItem.feed_id,
            WatchAction.kind,
            literal(RunState.PENDING, String()),
            literal(0),
            literal(""),
            literal(now, type_=WatchActionRun.created_at.type),
            literal(now, type_=WatchActionRun.scheduled_at.type),
        )
        .select_from(FeedItem)
        .join(WatchFeed, WatchFeed.feed_id == FeedItem.feed_id)
        .join(Watch, and_(Watch.id == WatchFeed.watch_id, Watch.is_active.is_(True)))
        .join(WatchAction, WatchAction.watch_id == Watch.id)
        .where(among(session, FeedItem.id, item_ids, String()), first)
    )
    columns = [
        "id",
        "account_id",
        "watch_id",
        "action_id",
        "feed_item_id",
        "feed_id",
        "kind",
        "state",
        "attempts",
        "error",
        "created_at",
        "scheduled_at",
    ]
    statement = (
        upsert(session, WatchActionRun)
        .from_select(columns, rows)
        .on_conflict_do_nothing(index_elements=["action_id", "feed_item_id"])
    )
    result = session.execute(statement)
    return int(getattr(result, "rowcount", 0) or 0)


# --- claim ---------------------------------------------------------------------------------------------


def window_of(moment: datetime, interval_seconds: int) -> tuple[datetime, datetime]:
    """The digest window `moment` falls in: windows are `interval_seconds` long and aligned to the Unix
    epoch (a daily digest closes at midnight UTC, an hourly one on the hour)."""
    if interval_seconds <= 0:
        return moment, moment
    seconds = moment.timestamp()
    start = math.floor(seconds / interval_seconds) * interval_seconds
    return (
        datetime.fromtimestamp(start, UTC),
        datetime.fromtimestamp(start + interval_seconds, UTC),
    )


def _is_digest(config: dict[str, Any]) -> bool:
    """Whether an action's runs go out in windows: a config is stored as its kind's model validated it
    (app/watches/specs.py), so only the kinds with a delivery cadence have a `delivery`."""
    return config.get("delivery") == "digest"


def spacing_of(config: dict[str, Any]) -> timedelta:
    """The least time between two deliveries of an action (the `email` kind's `min_interval_seconds`;
    nothing for the other kinds, whose configs have no such field)."""
    return timedelta(seconds=int(config.get("min_interval_seconds") or 0))


def gathers_runs(config: dict[str, Any]) -> bool:
    """Whether an action's runs due together go out together: a digest's window, and the runs an
    action with a spacing held back until its next delivery."""
    return _is_digest(config) or spacing_of(config) > timedelta(0)


def claim_runs(session: Session, now: datetime, limit: int, digest_cap: int) -> Claim:
    """Claims up to `limit` due runs (and, for a digest window that is due, the rest of that window up
    to `digest_cap`). Runs of paused watches become `skipped`; a digest action's new runs are put in
    their window and wait for its end (not an attempt)."""
    base = (
        select(WatchActionRun.id, WatchActionRun.watch_id, WatchActionRun.action_id, WatchActionRun.attempts)
        .add_columns(WatchActionRun.window_end, WatchActionRun.created_at)
        .where(
            WatchActionRun.state.in_(QUEUED),
            WatchActionRun.completed_at.is_(None),
            WatchActionRun.scheduled_at <= now,
        )
    )
    due = session.execute(
        base.order_by(WatchActionRun.scheduled_at, WatchActionRun.id)
        .limit(limit)
        .with_for_update(**skip_locked(session))
    ).all()
    claim = Claim()
    if not due:
        return claim
    watches, actions = _watches_and_actions(session, due)
    free_at = _next_free(session, actions)
    sorted_runs = _sort_due(due, watches, actions, free_at, now)
    taken = sorted_runs.taken
    taken.extend(_rest_of_windows(session, base, sorted_runs, digest_cap))
    _mark_claimed(session, sorted_runs, now)
    claim.skipped = len(sorted_runs.skipped)
    claim.parked = sum(len(ids) for ids in sorted_runs.parked.values())
    claim.runs = _claimed(session, taken, watches, actions, now)
    return claim


def _watches_and_actions(session: Session, due: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The due runs' watches (name, active) and actions (kind, config) by id."""
    watch_ids = {row.watch_id for row in due}
    action_ids = {row.action_id for row in due}
    watches = {
        row.id: row
        for row in session.execute(
            select(Watch.id, Watch.name, Watch.is_active).where(Watch.id.in_(watch_ids))
        )
    }
    actions = {
        row.id: row
        for row in session.execute(
            select(WatchAction.id, WatchAction.kind, WatchAction.config).where(WatchAction.id.in_(action_ids))
        )
    }
    return watches, actions


def _next_free(session: Session, actions: dict[str, Any]) -> dict[str, datetime]:
    """For each action with a spacing, when it may deliver again: its last delivery's start (a run of
    it running or succeeded) plus the spacing. The actions' rows are locked first, so two workers
    claiming at once see each other's deliveries and do not both send."""
    spaced = {action_id: spacing_of(row.config) for action_id, row in actions.items()}
    spaced = {action_id: spacing for action_id, spacing in spaced.items() if spacing > timedelta(0)}
    if not spaced:
        return {}
    session.execute(select(WatchAction.id).where(WatchAction.id.in_(spaced)).with_for_update())
    last = session.execute(
        select(WatchActionRun.action_id, func.max(WatchActionRun.started_at))
        .where(
            WatchActionRun.action_id.in_(spaced),
            WatchActionRun.state.in_((RunState.RUNNING, RunState.SUCCEEDED)),
        )
        .group_by(WatchActionRun.action_id)
    ).all()
    return {action_id: started + spaced[action_id] for action_id, started in last if started is not None}


@dataclass
class _SortedRuns:
    """The due runs by what happens to them: skipped (paused watch), parked until their digest
    window ends, or taken; and the count taken of each due digest window."""

    skipped: list[str] = field(default_factory=list)
    parked: dict[datetime, list[str]] = field(default_factory=dict)
    taken: list[Any] = field(default_factory=list)
    windows: dict[tuple[str, datetime], int] = field(default_factory=dict)


def _sort_due(
    due: Sequence[Any],
    watches: dict[str, Any],
    actions: dict[str, Any],
    free_at: dict[str, datetime],
    now: datetime,
) -> _SortedRuns:
    """`free_at`: when each action with a spacing may deliver again (`_next_free`); a run that would
    go sooner waits until then, parked like a digest's run (not an attempt)."""
    runs = _SortedRuns()
    skipped, parked, taken, windows = runs.skipped, runs.parked, runs.taken, runs.windows
    delivering: set[str] = set()
    for row in due:
        watch = watches.get(row.watch_id)
        action = actions.get(row.action_id)
        if watch is None or action is None:
            continue  # deleted while being claimed: its runs go with it
        if not watch.is_active:
            skipped.append(row.id)
            continue
        if _is_digest(action.config) and row.window_end is None:
            interval = int(action.config.get("digest_interval_seconds") or 0)
            end = window_of(now, interval)[1]
            if end > now:
                parked.setdefault(end, []).append(row.id)
                continue
        if spacing_of(action.config) > timedelta(0) and row.action_id not in delivering:
            free = free_at.get(row.action_id)
            if free is not None and free > now:
                parked.setdefault(free, []).append(row.id)
                continue
            # This claim delivers for the action: its other runs due now join this delivery.
            delivering.add(row.action_id)
        taken.append(row)
        if gathers_runs(action.config) and row.window_end is not None:
            windows[(row.action_id, row.window_end)] = windows.get((row.action_id, row.window_end), 0) + 1
    return runs


def _rest_of_windows(session: Session, base: Any, runs: _SortedRuns, digest_cap: int) -> list[Any]:
    """The rest of each due digest window joins the claim, so a window goes out together."""
    taken_ids = {row.id for row in runs.taken}
    rest: list[Any] = []
    for (action_id, end), count in runs.windows.items():
        if count >= digest_cap:
            continue
        more = session.execute(
            base.where(
                WatchActionRun.action_id == action_id,
                WatchActionRun.window_end == end,
                WatchActionRun.id.not_in(taken_ids),
            )
            .order_by(WatchActionRun.id)
            .limit(digest_cap - count)
            .with_for_update(**skip_locked(session))
        ).all()
        rest.extend(more)
        taken_ids.update(row.id for row in more)
    return rest


def _mark_claimed(session: Session, runs: _SortedRuns, now: datetime) -> None:
    """Skipped runs complete, parked ones wait for their window's end, taken ones start an attempt."""
    skipped, parked, taken = runs.skipped, runs.parked, runs.taken
    if skipped:
        session.execute(
            update(WatchActionRun)
            .where(WatchActionRun.id.in_(skipped))
            .values(state=RunState.SKIPPED, error=PAUSED, completed_at=now, scheduled_at=None)
        )
    for end, ids in parked.items():
        session.execute(
            update(WatchActionRun).where(WatchActionRun.id.in_(ids)).values(window_end=end, scheduled_at=end)
        )
    if taken:
        session.execute(
            update(WatchActionRun)
            .where(WatchActionRun.id.in_([row.id for row in taken]))
            .values(state=RunState.RUNNING, started_at=now, attempts=WatchActionRun.attempts + 1)
        )


def _claimed(
    session: Session, taken: list[Any], watches: dict[str, Any], actions: dict[str, Any], now: datetime
) -> list[ClaimedRun]:
    if not taken:
        return []
    details = {
        row.id: row
        for row in session.execute(
            select(
                WatchActionRun.id,
                WatchActionRun.account_id,
                WatchActionRun.feed_item_id,
                WatchActionRun.feed_id,
            ).where(WatchActionRun.id.in_([row.id for row in taken]))
        )
    }
    item_ids = {detail.feed_item_id for detail in details.values()}
    items = {
        row.id: ItemRow(row.source_kind, row.external_id, row.source_label, row.occurred_at, row.data)
        for row in session.execute(
            select(
                FeedItem.id,
                FeedItem.source_kind,
                FeedItem.external_id,
                FeedItem.source_label,
                FeedItem.occurred_at,
                FeedItem.data,
            ).where(FeedItem.id.in_(item_ids))
        )
    }
    claimed = []
    for row in taken:
        detail = details[row.id]
        action = actions[row.action_id]
        window = None
        if _is_digest(action.config):
            interval = int(action.config.get("digest_interval_seconds") or 0)
            # Without an interval a digest is whatever is queued at this pass.
            end = row.window_end or now
            window = (end - timedelta(seconds=interval), end)
        claimed.append(
            ClaimedRun(
                run_id=row.id,
                attempt=row.attempts + 1,
                account_id=detail.account_id,
                watch_id=row.watch_id,
                watch_name=watches[row.watch_id].name,
                action_id=row.action_id,
                kind=action.kind,
                config=action.config,
                feed_item_id=detail.feed_item_id,
                feed_id=detail.feed_id,
                item=items.get(detail.feed_item_id),
                window=window,
            )
        )
    return claimed


# --- deliveries and outcomes -----------------------------------------------------------------------


def open_deliveries(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Delivery rows, `pending`, written (and committed by the caller) before their calls are made."""
    if rows:
        session.execute(insert(WatchActionDelivery), list(rows))


def _final(outcome: Outcome, now: datetime) -> dict[str, Any]:
    values: dict[str, Any] = {
        "b_id": outcome.run.run_id,
        "b_state": outcome.state,
        "b_result": outcome.result,
        "b_error": outcome.error[:4000],
        "b_kind": outcome.run.kind,
        "b_delivery_id": outcome.delivery_id,
        "b_completed_at": now,
        "b_scheduled_at": None,
    }
    if outcome.state == RunState.FAILED and outcome.run.attempt < MAX_ATTEMPTS:
        delay = RETRY_DELAYS[min(outcome.run.attempt, len(RETRY_DELAYS)) - 1]
        values["b_completed_at"] = None
        values["b_scheduled_at"] = now + delay
    return values


def record_outcomes(
    session: Session, outcomes: Sequence[Outcome], deliveries: Sequence[DeliveryOutcome], now: datetime
) -> int:
    """Writes what the actions did and enqueues the next action of each succeeded run; returns how
    many runs were recorded (a run another worker took back in the meantime is not)."""
    if deliveries:
        session.execute(
            update(DELIVERIES)
            .where(DELIVERIES.c.id == bindparam("b_id"))
            .values(
                state=bindparam("b_state"),
                http_status=bindparam("b_http_status"),
                error=bindparam("b_error"),
                completed_at=bindparam("b_completed_at"),
            ),
            [
                {
                    "b_id": d.delivery_id,
                    "b_state": d.state,
                    "b_http_status": d.http_status,
                    "b_error": d.error[:4000],
                    "b_completed_at": d.completed_at,
                }
                for d in deliveries
            ],
        )
    if not outcomes:
        return 0
    held = {
        run_id: attempts
        for run_id, attempts in session.execute(
            select(WatchActionRun.id, WatchActionRun.attempts)
            .where(
                WatchActionRun.id.in_([o.run.run_id for o in outcomes]),
                WatchActionRun.state == RunState.RUNNING,
            )
            .with_for_update()
        ).all()
    }
    mine = [o for o in outcomes if held.get(o.run.run_id) == o.run.attempt]
    if not mine:
        return 0
    session.execute(
        update(RUNS)
        .where(RUNS.c.id == bindparam("b_id"))
        .values(
            state=bindparam("b_state"),
            result=bindparam("b_result", type_=RUNS.c.result.type),
            error=bindparam("b_error"),
            kind=bindparam("b_kind"),
            delivery_id=bindparam("b_delivery_id"),
            completed_at=bindparam("b_completed_at", type_=RUNS.c.completed_at.type),
            scheduled_at=bindparam("b_scheduled_at", type_=RUNS.c.scheduled_at.type),
        ),
        [_final(o, now) for o in mine],
    )
    advance(session, [o.run for o in mine if o.state == RunState.SUCCEEDED], now)
    return len(mine)


def advance(session: Session, runs: Sequence[ClaimedRun], now: datetime) -> int:
    """The next action's run for each succeeded run (the action after it in rank order, as the chain
    stands now); none after the last action."""
    if not runs:
        return 0
    chains: dict[str, list[tuple[int, str, ActionKind]]] = {}
    for watch_id, rank, action_id, kind in session.execute(
        select(WatchAction.watch_id, WatchAction.rank, WatchAction.id, WatchAction.kind)
        .where(WatchAction.watch_id.in_({run.watch_id for run in runs}))
        .order_by(WatchAction.watch_id, WatchAction.rank)
    ).all():
        chains.setdefault(watch_id, []).append((rank, action_id, kind))
    rows = []
    for run in runs:
        chain = chains.get(run.watch_id, [])
        position = next((i for i, (_, action_id, _) in enumerate(chain) if action_id == run.action_id), None)
        if position is None or position + 1 >= len(chain):
            continue
        _, next_id, next_kind = chain[position + 1]
        rows.append(
            {
                "id": new_ulid(),
                "account_id": run.account_id,
                "watch_id": run.watch_id,
                "action_id": next_id,
                "feed_item_id": run.feed_item_id,
                "feed_id": run.feed_id,
                "kind": next_kind,
                "state": RunState.PENDING,
                "attempts": 0,
                "error": "",
                "created_at": now,
                "scheduled_at": now,
            }
        )
    if not rows:
        return 0
    statement = upsert(session, WatchActionRun).on_conflict_do_nothing(
        index_elements=["action_id", "feed_item_id"]
    )
    session.execute(statement, rows)
    return len(rows)


# --- the sweep -----------------------------------------------------------------------------------------


def take_back_stale(session: Session, now: datetime, lease: timedelta) -> int:
    """Runs left `running` past the lease (their worker died) go back to the queue as a failed attempt,
    due at once; a run whose attempts are spent stays failed. Their deliveries still `pending` failed
    too: nobody will record their answer."""
    cutoff = now - lease
    stale = list(
        session.execute(
            select(WatchActionRun.id, WatchActionRun.attempts)
            .where(WatchActionRun.state == RunState.RUNNING, WatchActionRun.started_at < cutoff)
            .with_for_update(**skip_locked(session))
        ).all()
    )
    if not stale:
        return 0
    message = f"taken back: left running for more than {int(lease.total_seconds())} s (its worker stopped?)"
    spent = [run_id for run_id, attempts in stale if attempts >= MAX_ATTEMPTS]
    retry = [run_id for run_id, attempts in stale if attempts < MAX_ATTEMPTS]
    if spent:
        session.execute(
            update(WatchActionRun)
            .where(WatchActionRun.id.in_(spent))
            .values(state=RunState.FAILED, error=message, completed_at=now, scheduled_at=None)
        )
    if retry:
        session.execute(
            update(WatchActionRun)
            .where(WatchActionRun.id.in_(retry))
            .values(state=RunState.FAILED, error=message, scheduled_at=now)
        )
    session.execute(
        update(WatchActionDelivery)
        .where(WatchActionDelivery.state == DeliveryState.PENDING, WatchActionDelivery.started_at < cutoff)
        .values(
            state=DeliveryState.FAILED,
            error="the worker stopped before the call was recorded",
            completed_at=now,
        )
    )
    return len(stale)
