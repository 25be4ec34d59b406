"""Reading what actions did: an action's runs (activity) with the items and feeds they ran on and a
summary of the window asked for, one run in full, and the deliveries of webhook actions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.kit.errors import NotFound
from app.kit.ids import normalize_ulid
from app.kit.v1_input import Cursor, invalid
from app.kit.windows import resolve_windows
from app.models import (
    TERMINAL_RUN_STATES,
    DeliveryState,
    Feed,
    FeedItem,
    RunState,
    WatchAction,
    WatchActionDelivery,
    WatchActionRun,
)
from app.watches.lookup import find_action
from app.watches.wire import (
    RunFeed,
    RunFeedItem,
    WatchActionDeliveryListResponse,
    WatchActionDeliveryView,
    WatchActionRunListResponse,
    WatchActionRunSummary,
    WatchActionRunView,
    Window,
    action_wire,
    delivery_wire,
    delivery_with_payload_wire,
    run_wire,
)

WINDOWS = ("24h", "yesterday", "7d", "30d")
DEFAULT_WINDOW = "7d"

# Whatever a query of runs selects, narrowing it keeps its type.
RunsQuery = TypeVar("RunsQuery", bound=Select[Any])


def read_choice(value: str | None, allowed: Iterable[str], name: str) -> str | None:
    """A query parameter that must be one of `allowed` (absent or empty: None); anything else is 400."""
    if value is None or value == "":
        return None
    allowed = tuple(allowed)
    if value not in allowed:
        raise invalid({name: [f"Unknown {name} {value!r}: use one of {', '.join(allowed)}."]})
    return value


def window_bounds(window: str, now: datetime) -> tuple[datetime, datetime | None]:
    """A window preset as (since, until): rolling windows end now (until null); `yesterday` is the
    previous UTC calendar day."""
    if window == "24h":
        return now - timedelta(hours=24), None
    if window == "7d":
        return now - timedelta(days=7), None
    if window == "30d":
        return now - timedelta(days=30), None
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight - timedelta(days=1), midnight


def run_summary(session: Session, action_id: str, window: str, now: datetime) -> WatchActionRunSummary:
    """Runs completed within the window, by state, and the backlog now. A failed run counts in
    `evaluated.failed` once its attempts are spent (it has a completion time) and in `retrying` until
    then, so no run is in two buckets."""
    since, until = window_bounds(window, now)
    query = (
        select(WatchActionRun.state, func.count())
        .where(WatchActionRun.action_id == action_id, WatchActionRun.completed_at >= since)
        .group_by(WatchActionRun.state)
    )
    if until is not None:
        query = query.where(WatchActionRun.completed_at < until)
    # Keyed by the states' values: the JSON encoder takes only plain strings as keys.
    evaluated = {state.value: 0 for state in TERMINAL_RUN_STATES}
    for state, count in session.execute(query).all():
        evaluated[state.value] = evaluated.get(state.value, 0) + int(count)
    backlog = dict(
        session.execute(
            select(WatchActionRun.state, func.count())
            .where(WatchActionRun.action_id == action_id, WatchActionRun.completed_at.is_(None))
            .group_by(WatchActionRun.state)
        ).all()
    )
    return WatchActionRunSummary.model_construct(
        window=cast(Window, window),  # read_choice took it from WINDOWS
        since=since,
        until=until,
        evaluated=evaluated,
        pending=int(backlog.get(RunState.PENDING, 0)),
        running=int(backlog.get(RunState.RUNNING, 0)),
        # A failed run without a completion time waits for its retry.
        retrying=int(backlog.get(RunState.FAILED, 0)),
    )


def _run_item(item_id: str, feed_id: str, label: str, occurred_at: Any, data: Any) -> RunFeedItem:
    data = data if isinstance(data, dict) else {}
    return RunFeedItem.model_construct(
        feed_id=feed_id,
        title=str(data.get("title") or ""),
        url=str(data.get("url") or ""),
        external_url=str(data.get("external_url") or ""),
        source_label=label or "",
        occurred_at=occurred_at,
    )


def feed_items_of(session: Session, item_ids: Iterable[str]) -> dict[str, RunFeedItem]:
    ids = sorted(set(item_ids))
    if not ids:
        return {}
    rows = session.execute(
        select(
            FeedItem.id, FeedItem.feed_id, FeedItem.source_label, FeedItem.occurred_at, FeedItem.data
        ).where(FeedItem.id.in_(ids))
    ).all()
    return {row[0]: _run_item(*row) for row in rows}


def feeds_of(session: Session, feed_ids: Iterable[str]) -> dict[str, RunFeed]:
    ids = sorted(set(feed_ids))
    if not ids:
        return {}
    rows = session.execute(select(Feed.id, Feed.name).where(Feed.id.in_(ids))).all()
    return {feed_id: RunFeed.model_construct(id=feed_id, name=name) for feed_id, name in rows}


def within_windows(query: RunsQuery, resolved: Mapping[str, datetime]) -> RunsQuery:
    """`query` of runs narrowed to the resolved bounds (resolve_windows' keys)."""
    if "completed_since" in resolved:
        query = query.where(WatchActionRun.completed_at >= resolved["completed_since"])
    if "completed_until" in resolved:
        query = query.where(WatchActionRun.completed_at < resolved["completed_until"])
    occurred = []
    if "occurred_since" in resolved:
        occurred.append(FeedItem.occurred_at >= resolved["occurred_since"])
    if "occurred_until" in resolved:
        occurred.append(FeedItem.occurred_at < resolved["occurred_until"])
    if occurred:
        query = query.where(WatchActionRun.feed_item_id.in_(select(FeedItem.id).where(*occurred)))
    return query


def run_page(
    session: Session,
    account_id: int,
    action_id: str,
    cursor: Cursor,
    *,
    state: str | None,
    window: str | None,
    now: datetime,
    bounds: Mapping[str, str] | None = None,
) -> WatchActionRunListResponse:
    """A page of the action's runs. `bounds` are the raw `occurred_since`, `occurred_until`,
    `completed_since` and `completed_until` (app/kit/windows), each half-open `[since, until)`: on
    when the run completed, and on when its item occurred (a pruned item's runs are then left out)."""
    state = read_choice(state, RunState, "state")
    window = read_choice(window, WINDOWS, "window") or DEFAULT_WINDOW
    try:
        resolved = resolve_windows(bounds or {}, now=now)
    except ValueError as exc:
        # resolve_windows starts its message with the parameter's name.
        field, _, message = str(exc).partition(": ")
        raise invalid({field: [message or field]}) from None
    action = find_action(session, account_id, action_id)
    query = select(WatchActionRun).where(WatchActionRun.action_id == action.id)
    if state is not None:
        query = query.where(WatchActionRun.state == state)
    query = within_windows(query, resolved)
    if cursor.after is not None:
        query = query.where(WatchActionRun.id < cursor.after)
    runs = list(session.scalars(query.order_by(WatchActionRun.id.desc()).limit(cursor.limit)))
    items = feed_items_of(session, (run.feed_item_id for run in runs))
    feeds = feeds_of(session, [run.feed_id for run in runs] + [i.feed_id for i in items.values()])
    return WatchActionRunListResponse.model_construct(
        items=[run_wire(run) for run in runs],
        next_cursor=runs[-1].id if len(runs) == cursor.limit else None,
        action=action_wire(action),
        feeds=feeds,
        feed_items=items,
        summary=run_summary(session, action.id, window, now) if cursor.after is None else None,
    )


def read_run(session: Session, account_id: int, run_id: str) -> WatchActionRunView:
    canonical = normalize_ulid(run_id)
    run = None
    if canonical is not None:
        run = session.scalars(
            select(WatchActionRun).where(
                WatchActionRun.id == canonical, WatchActionRun.account_id == account_id
            )
        ).first()
    if run is None:
        raise NotFound(f"No run {run_id}.")
    action = session.get(WatchAction, run.action_id)
    item = feed_items_of(session, [run.feed_item_id]).get(run.feed_item_id)
    feed = feeds_of(session, [run.feed_id]).get(run.feed_id)
    return WatchActionRunView.model_construct(
        run=run_wire(run),
        action=action_wire(action) if action is not None else None,
        feed=feed,
        feed_item=item,
    )


def delivery_page(
    session: Session, account_id: int, action_id: str, cursor: Cursor, *, state: str | None
) -> WatchActionDeliveryListResponse:
    state = read_choice(state, DeliveryState, "state")
    action = find_action(session, account_id, action_id)
    query = select(WatchActionDelivery).where(WatchActionDelivery.action_id == action.id)
    if state is not None:
        query = query.where(WatchActionDelivery.state == state)
    if cursor.after is not None:
        query = query.where(WatchActionDelivery.id < cursor.after)
    rows = list(session.scalars(query.order_by(WatchActionDelivery.id.desc()).limit(cursor.limit)))
    return WatchActionDeliveryListResponse.model_construct(
        items=[delivery_wire(row) for row in rows],
        next_cursor=rows[-1].id if len(rows) == cursor.limit else None,
    )


def delivery_detail(session: Session, account_id: int, delivery_id: str) -> WatchActionDeliveryView:
    canonical = normalize_ulid(delivery_id)
    row = None
    if canonical is not None:
        row = session.scalars(
            select(WatchActionDelivery).where(
                WatchActionDelivery.id == canonical, WatchActionDelivery.account_id == account_id
            )
        ).first()
    if row is None:
        raise NotFound(f"No delivery {delivery_id}.")
    return delivery_with_payload_wire(row)
