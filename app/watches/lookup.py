"""Finding the account's watches and actions by id: another account's rows are indistinguishable from
none (404)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.kit.errors import NotFound
from app.kit.ids import normalize_ulid
from app.models import Watch, WatchAction


def find_watch(session: Session, account_id: int, watch_id: str, *, lock: bool = False) -> Watch:
    canonical = normalize_ulid(watch_id)
    watch = None
    if canonical is not None:
        query = select(Watch).where(Watch.id == canonical, Watch.account_id == account_id)
        if lock:
            query = query.with_for_update()
        watch = session.scalars(query).first()
    if watch is None:
        raise NotFound(f"No watch {watch_id}.")
    return watch


def find_action(session: Session, account_id: int, action_id: str) -> WatchAction:
    canonical = normalize_ulid(action_id)
    action = None
    if canonical is not None:
        action = session.scalars(
            select(WatchAction).where(WatchAction.id == canonical, WatchAction.account_id == account_id)
        ).first()
    if action is None:
        raise NotFound(f"No action {action_id}.")
    return action
