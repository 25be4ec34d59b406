"""Backfills: run one action again over the items its previous step passed within a window (or, for
the chain's first action, the items of the watch's feeds), an explicit request that is no exception to
the rule that a watch does not replay old items by itself.

The window is openmagpie's four bounds (app/kit/windows): `completed_*` on when the previous step's
run completed (for the first action: when the item was collected), `occurred_*` on when the item
occurred; at least one is required. Without `replace`, only items the action never ran on get a run;
with it, the action's finished runs on those items and those of every later action are deleted first,
so the items go down the rest of the chain again. The work is done in the request (the runs it adds are
the drain's, as any run), and the row records it; a dry run counts and stores nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db import among, upsert
from app.kit.errors import NotFound
from app.kit.ids import new_ulid, normalize_ulid, ulid_floor
from app.kit.v1_input import Cursor, invalid
from app.kit.windows import resolve_windows
from app.models import (
    TERMINAL_RUN_STATES,
    ActionBackfill,
    BackfillState,
    FeedItem,
    RunState,
    WatchAction,
    WatchActionRun,
    WatchFeed,
)
from app.watches.activity_service import within_windows
from app.watches.lookup import find_action
from app.watches.wire import BackfillJob, BackfillListResponse, BackfillPreview, job_wire


@dataclass(frozen=True, slots=True)
class Plan:
    source: WatchAction | None
    matched: int
    # (item id, feed id) of the matched items still stored.
    present: list[tuple[str, str]]
    to_delete: list[str]
    to_enqueue: list[tuple[str, str]]


def _resolved(bounds: Mapping[str, str], now: datetime) -> dict[str, datetime]:
    try:
        resolved = resolve_windows(bounds, now=now)
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise invalid({field: [message or field]}) from None
    if not resolved:
        raise invalid(
            {"completed_since": ["A backfill needs a window: a `completed_*` or `occurred_*` bound."]}
        )
    return resolved


def _plan(session: Session, target: WatchAction, resolved: Mapping[str, datetime], replace: bool) -> Plan:
    source = session.scalars(
        select(WatchAction)
        .where(WatchAction.watch_id == target.watch_id, WatchAction.rank < target.rank)
        .order_by(WatchAction.rank.desc())
        .limit(1)
    ).first()
    if source is not None:
        passed = within_windows(
            select(WatchActionRun.feed_item_id).where(
                WatchActionRun.action_id == source.id, WatchActionRun.state == RunState.SUCCEEDED
            ),
            resolved,
        )
        matched_ids = list(session.scalars(passed))
    else:
        items = select(FeedItem.id).where(
            FeedItem.feed_id.in_(select(WatchFeed.feed_id).where(WatchFeed.watch_id == target.watch_id))
        )
        # Item ids are ULIDs made as items are stored: their order is the order of collection.
        if "completed_since" in resolved:
            items = items.where(FeedItem.id >= ulid_floor(resolved["completed_since"]))
        if "completed_until" in resolved:
            items = items.where(FeedItem.id < ulid_floor(resolved["completed_until"]))
        if "occurred_since" in resolved:
            items = items.where(FeedItem.occurred_at >= resolved["occurred_since"])
        if "occurred_until" in resolved:
            items = items.where(FeedItem.occurred_at < resolved["occurred_until"])
        matched_ids = list(session.scalars(items))
    present = [
        (item_id, feed_id)
        for item_id, feed_id in session.execute(
            select(FeedItem.id, FeedItem.feed_id).where(
                among(session, FeedItem.id, matched_ids, FeedItem.id.type)
            )
        ).all()
    ]
    present_ids = [item_id for item_id, _ in present]
    later = select(WatchAction.id).where(
        WatchAction.watch_id == target.watch_id, WatchAction.rank >= target.rank
    )
    runs = session.execute(
        select(
            WatchActionRun.id, WatchActionRun.action_id, WatchActionRun.feed_item_id, WatchActionRun.state
        ).where(
            WatchActionRun.action_id.in_(later),
            among(session, WatchActionRun.feed_item_id, present_ids, WatchActionRun.feed_item_id.type),
        )
    ).all()
    to_delete = [run_id for run_id, _, _, state in runs if replace and state in TERMINAL_RUN_STATES]
    deleted = set(to_delete)
    kept_on_target = {
        item for run_id, action, item, _ in runs if action == target.id and run_id not in deleted
    }
    to_enqueue = [(item_id, feed_id) for item_id, feed_id in present if item_id not in kept_on_target]
    return Plan(source, len(matched_ids), present, to_delete, to_enqueue)


def _bounds_of(resolved: Mapping[str, datetime]) -> dict[str, datetime | None]:
    return {
        name: resolved.get(name)
        for name in ("occurred_since", "occurred_until", "completed_since", "completed_until")
    }


def backfill(
    session: Session,
    account_id: int,
    action_id: str,
    bounds: Mapping[str, str],
    *,
    replace: bool,
    dry_run: bool,
    now: datetime,
) -> BackfillPreview | BackfillJob:
    """A dry run's preview, or the backfill done and its record."""
    target = find_action(session, account_id, action_id)
    resolved = _resolved(bounds, now)
    plan = _plan(session, target, resolved, replace)
    source_id = plan.source.id if plan.source is not None else ""
    # What the preview and the record both count.
    found: dict[str, Any] = {
        "matched": plan.matched,
        "present": len(plan.present),
        "pruned": plan.matched - len(plan.present),
    }
    if dry_run:
        return BackfillPreview.model_construct(
            dry_run=True,
            source_action_id=source_id,
            source_is_head=plan.source is None,
            replace=replace,
            **found,
            would_delete=len(plan.to_delete),
            would_enqueue=len(plan.to_enqueue),
        )
    if plan.to_delete:
        session.execute(
            delete(WatchActionRun).where(
                among(session, WatchActionRun.id, plan.to_delete, WatchActionRun.id.type)
            )
        )
    _enqueue(session, target, plan.to_enqueue, now)
    job = ActionBackfill(
        id=new_ulid(),
        account_id=account_id,
        target_action_id=target.id,
        source_action_id=source_id,
        kind=target.kind,
        state=BackfillState.DONE,
        replace=replace,
        **_bounds_of(resolved),
        **found,
        deleted=len(plan.to_delete),
        enqueued=len(plan.to_enqueue),
        error="",
        created_at=now,
        started_at=now,
        completed_at=now,
    )
    session.add(job)
    session.flush()
    return job_wire(job)


def _enqueue(session: Session, target: WatchAction, items: Sequence[tuple[str, str]], now: datetime) -> None:
    if not items:
        return
    rows = [
        {
            "id": new_ulid(),
            "account_id": target.account_id,
            "watch_id": target.watch_id,
            "action_id": target.id,
            "feed_item_id": item_id,
            "feed_id": feed_id,
            "kind": target.kind,
            "state": RunState.PENDING,
            "attempts": 0,
            "error": "",
            "created_at": now,
            "scheduled_at": now,
        }
        for item_id, feed_id in items
    ]
    statement = upsert(session, WatchActionRun).on_conflict_do_nothing(
        index_elements=["action_id", "feed_item_id"]
    )
    session.execute(statement, rows)


def find_backfill(session: Session, account_id: int, backfill_id: str) -> BackfillJob:
    canonical = normalize_ulid(backfill_id)
    job = (
        session.scalars(
            select(ActionBackfill).where(
                ActionBackfill.id == canonical, ActionBackfill.account_id == account_id
            )
        ).first()
        if canonical is not None
        else None
    )
    if job is None:
        raise NotFound(f"No backfill {backfill_id}.")
    return job_wire(job)


def backfill_page(session: Session, account_id: int, cursor: Cursor) -> BackfillListResponse:
    query = select(ActionBackfill).where(ActionBackfill.account_id == account_id)
    if cursor.after is not None:
        query = query.where(ActionBackfill.id < cursor.after)
    jobs = list(session.scalars(query.order_by(ActionBackfill.id.desc()).limit(cursor.limit)))
    return BackfillListResponse.model_construct(
        items=[job_wire(job) for job in jobs],
        next_cursor=jobs[-1].id if len(jobs) == cursor.limit else None,
    )
