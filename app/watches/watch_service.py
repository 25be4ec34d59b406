"""The rules of watches: listing, reading, creating, editing (PUT), patching and deleting, each with a
dry run that validates everything and stores nothing."""

from __future__ import annotations

from datetime import datetime
from typing import overload

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from app.identity.principal import Principal
from app.kit.ids import new_ulid, normalize_ulid
from app.kit.v1_input import Cursor, invalid
from app.models import Feed, Watch, WatchAction, WatchFeed
from app.watches.actions.base import ActionRules
from app.watches.chain_service import (
    CheckedAction,
    apply_chain,
    chain_of,
    check_chain,
    engine_errors,
    preview_chain,
)
from app.watches.lookup import find_watch
from app.watches.specs import ActionInput, WatchInput, WatchPatch
from app.watches.wire import (
    WatchActionListResponse,
    WatchListResponse,
    WatchMutationResponse,
    WatchView,
    action_wire,
    watch_wire,
    watch_with_actions_wire,
)


def feed_ids_of(session: Session, watch_ids: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {watch_id: [] for watch_id in watch_ids}
    if watch_ids:
        rows = session.execute(
            select(WatchFeed.watch_id, WatchFeed.feed_id)
            .where(WatchFeed.watch_id.in_(watch_ids))
            .order_by(WatchFeed.created_at, WatchFeed.feed_id)
        ).all()
        for watch_id, feed_id in rows:
            found[watch_id].append(feed_id)
    return found


def list_watches(session: Session, account_id: int, cursor: Cursor) -> WatchListResponse:
    """The account's watches, newest first, `cursor.limit` at a time."""
    query = select(Watch).where(Watch.account_id == account_id)
    if cursor.after is not None:
        query = query.where(Watch.id < cursor.after)
    watches = list(session.scalars(query.order_by(Watch.id.desc()).limit(cursor.limit)))
    feeds = feed_ids_of(session, [w.id for w in watches])
    return WatchListResponse.model_construct(
        items=[watch_wire(w, feeds[w.id]) for w in watches],
        next_cursor=watches[-1].id if len(watches) == cursor.limit else None,
    )


def read_watch(session: Session, account_id: int, watch_id: str) -> WatchView:
    watch = find_watch(session, account_id, watch_id)
    return watch_with_actions_wire(
        watch, feed_ids_of(session, [watch.id])[watch.id], chain_of(session, watch.id)
    )


def list_actions(session: Session, account_id: int, watch_id: str) -> WatchActionListResponse:
    watch = find_watch(session, account_id, watch_id)
    return WatchActionListResponse.model_construct(
        items=[action_wire(a) for a in chain_of(session, watch.id)]
    )


def _check_feeds(
    session: Session, account_id: int, feed_ids: list[str], errors: dict[str, list[str]]
) -> list[str]:
    """The account's feeds named by `feed_ids`, each once, in the order given; unknown ones into
    `errors` (a 400: the body is wrong, not the URL)."""
    canonical = [normalize_ulid(value) for value in feed_ids]
    known = set(
        session.scalars(
            select(Feed.id).where(Feed.account_id == account_id, Feed.id.in_([c for c in canonical if c]))
        )
    )
    found: list[str] = []
    for index, (raw, value) in enumerate(zip(feed_ids, canonical, strict=True)):
        if value is None or value not in known:
            errors.setdefault(f"feed_ids[{index}]", []).append(f"No feed {raw} in the account.")
        elif value not in found:
            found.append(value)
    return found


def _set_feeds(session: Session, watch: Watch, feed_ids: list[str], now: datetime) -> None:
    """Replaces the subscription set by diff: a feed kept keeps its subscription time."""
    current = set(feed_ids_of(session, [watch.id])[watch.id])
    dropped = current - set(feed_ids)
    if dropped:
        session.execute(
            delete(WatchFeed).where(WatchFeed.watch_id == watch.id, WatchFeed.feed_id.in_(dropped))
        )
    added = [feed_id for feed_id in feed_ids if feed_id not in current]
    if added:
        session.execute(
            insert(WatchFeed), [{"watch_id": watch.id, "feed_id": f, "created_at": now} for f in added]
        )


@overload
def _checked_inputs(
    session: Session,
    account_id: int,
    feed_ids: list[str],
    actions: list[ActionInput],
    current: list[WatchAction],
    *,
    rules: ActionRules,
    turning_on: bool = False,
) -> tuple[list[str], list[CheckedAction]]: ...


@overload
def _checked_inputs(
    session: Session,
    account_id: int,
    feed_ids: list[str] | None,
    actions: list[ActionInput] | None,
    current: list[WatchAction],
    *,
    rules: ActionRules,
    turning_on: bool = False,
) -> tuple[list[str] | None, list[CheckedAction] | None]: ...


def _checked_inputs(
    session: Session,
    account_id: int,
    feed_ids: list[str] | None,
    actions: list[ActionInput] | None,
    current: list[WatchAction],
    *,
    rules: ActionRules,
    turning_on: bool = False,
) -> tuple[list[str] | None, list[CheckedAction] | None]:
    """The feeds and chain a write sends, checked. `turning_on` (an edit that sends `is_active: true`
    and no chain) checks the stored chain's engines too: a watch is not switched on to fail every run."""
    errors: dict[str, list[str]] = {}
    feeds = _check_feeds(session, account_id, feed_ids, errors) if feed_ids is not None else None
    chain = None
    if actions is not None:
        chain, chain_errors = check_chain(actions, current, rules=rules)
        for name, messages in chain_errors.items():
            errors.setdefault(name, []).extend(messages)
    elif turning_on:
        for index, action in enumerate(current):
            engine_errors(action.kind, action.config, f"actions[{index}]", errors, rules)
    if errors:
        raise invalid(errors)
    return feeds, chain


def create_watch(
    session: Session,
    principal: Principal,
    body: WatchInput,
    *,
    dry_run: bool,
    rules: ActionRules,
    now: datetime,
) -> WatchMutationResponse:
    account_id = principal.account.id
    feeds, chain = _checked_inputs(
        session, account_id, body.feed_ids or [], body.actions or [], [], rules=rules
    )
    if dry_run:
        return WatchMutationResponse.model_construct(
            id=None,
            name=body.name,
            is_active=body.is_active,
            feed_ids=feeds,
            user_id=str(principal.user.id),
            created_at=None,
            actions=preview_chain(None, chain),
            dry_run=True,
        )
    watch = Watch(
        id=new_ulid(),
        account_id=account_id,
        user_id=principal.user.id,
        name=body.name,
        is_active=body.is_active,
        created_at=now,
        updated_at=now,
    )
    session.add(watch)
    session.flush()
    _set_feeds(session, watch, feeds, now)
    actions = apply_chain(session, watch, chain, [], now)
    return _mutation(watch_with_actions_wire(watch, feeds, actions), dry_run=False)


def _mutation(view: WatchView, *, dry_run: bool) -> WatchMutationResponse:
    return WatchMutationResponse.model_construct(**dict(view), dry_run=dry_run)


def edit_watch(
    session: Session,
    principal: Principal,
    watch_id: str,
    body: WatchInput | WatchPatch,
    *,
    dry_run: bool,
    rules: ActionRules,
    now: datetime,
) -> WatchMutationResponse:
    """PUT (WatchInput: name and is_active replaced; feed_ids and actions when given) and PATCH
    (WatchPatch: only what is given)."""
    watch = find_watch(session, principal.account.id, watch_id, lock=not dry_run)
    current = chain_of(session, watch.id)
    actions = body.actions if isinstance(body, WatchInput) else None
    feeds, chain = _checked_inputs(
        session,
        principal.account.id,
        body.feed_ids,
        actions,
        current,
        rules=rules,
        turning_on=body.is_active is True,
    )
    name = body.name if body.name is not None else watch.name
    is_active = body.is_active if body.is_active is not None else watch.is_active
    if dry_run:
        wire = watch_wire(watch, feeds if feeds is not None else feed_ids_of(session, [watch.id])[watch.id])
        previews = preview_chain(watch.id, chain) if chain is not None else [action_wire(a) for a in current]
        edited = wire.model_copy(update={"name": name, "is_active": is_active})
        return WatchMutationResponse.model_construct(**dict(edited), actions=previews, dry_run=True)
    if (name, is_active) != (watch.name, watch.is_active):
        watch.name, watch.is_active = name, is_active
        watch.updated_at = now
    if feeds is not None:
        _set_feeds(session, watch, feeds, now)
    if chain is not None:
        current = apply_chain(session, watch, chain, current, now)
    session.flush()
    return _mutation(
        watch_with_actions_wire(watch, feed_ids_of(session, [watch.id])[watch.id], current), dry_run=False
    )


def delete_watch(
    session: Session, principal: Principal, watch_id: str, *, dry_run: bool
) -> WatchMutationResponse | None:
    """Deletes the watch with its actions, runs and deliveries; a dry run returns what would go."""
    watch = find_watch(session, principal.account.id, watch_id)
    if dry_run:
        view = watch_with_actions_wire(
            watch, feed_ids_of(session, [watch.id])[watch.id], chain_of(session, watch.id)
        )
        return _mutation(view, dry_run=True)
    session.execute(delete(Watch).where(Watch.id == watch.id))
    return None
