"""The rules of a watch's action chain: validating action inputs (with the stored secrets an edit keeps),
adding, editing, moving and deleting actions, and replacing the whole chain, ranks kept dense (0 to
n-1). Every chain change holds the watch's row lock, so two edits of one chain do not interleave."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.identity.principal import Principal
from app.kit.ids import new_ulid, normalize_ulid
from app.kit.v1_input import field_errors, invalid
from app.models import ActionKind, Watch, WatchAction
from app.watches.actions import ACTIONS
from app.watches.actions.base import ActionRules
from app.watches.lookup import find_action, find_watch
from app.watches.specs import MAX_ACTIONS, ActionInput
from app.watches.wire import WatchActionMutationResponse, WatchActionWire, action_wire

# Ranks move out of the way through this offset first, so the unique (watch_id, rank) never sees two
# actions at one rank while a chain is renumbered.
RANK_OFFSET = 1_000_000


@dataclass(slots=True)
class CheckedAction:
    """An action input that passed validation: its kind and the config to store (secrets restored)."""

    kind: ActionKind
    config: dict[str, Any]
    existing: WatchAction | None = None


def engine_errors(
    kind: ActionKind, config: dict[str, Any], path: str, errors: dict[str, list[str]], rules: ActionRules
) -> bool:
    """An engine action whose engine cannot run here (none configured, the optional package missing)
    goes into `errors` with what GET /v1/engines says of it: accepted, it would only fail every run."""
    if not ACTIONS[kind].uses_engine:
        return False
    problem = rules.engine_problem(str(config["engine"]["kind"]))
    if problem is None:
        return False
    errors.setdefault(f"{path}.config.engine", []).append(problem.message())
    return True


def check_action(
    item: ActionInput,
    prior: WatchAction | None,
    path: str,
    errors: dict[str, list[str]],
    *,
    rules: ActionRules,
) -> CheckedAction | None:
    """Validates one action input into `errors` (paths under `path`); None when it is invalid."""
    kind = ActionKind(item.kind)
    action = ACTIONS[kind]
    try:
        config = action.config_model.model_validate(item.config).model_dump(mode="json")
    except ValidationError as exc:
        for name, messages in field_errors(exc, prefix=f"{path}.config").items():
            errors.setdefault(name, []).extend(messages)
        return None
    if engine_errors(kind, config, path, errors, rules):
        return None
    stored = prior.config if prior is not None and prior.kind == kind else None
    config, problems = action.checked(config, stored, rules)
    for name, messages in problems.items():
        errors.setdefault(f"{path}.config.{name}", []).extend(messages)
    if problems:
        return None
    return CheckedAction(kind, config, prior)


def chain_of(session: Session, watch_id: str) -> list[WatchAction]:
    return list(
        session.scalars(
            select(WatchAction).where(WatchAction.watch_id == watch_id).order_by(WatchAction.rank)
        )
    )


def check_chain(
    items: list[ActionInput], existing: list[WatchAction], *, rules: ActionRules
) -> tuple[list[CheckedAction], dict[str, list[str]]]:
    """A whole chain (`actions` of a watch create or edit): inputs with an `id` are the existing actions
    they name (kept in place with their history; a masked secret comes back from that same action),
    inputs without one are new. The list order is the chain."""
    errors: dict[str, list[str]] = {}
    by_id = {action.id: action for action in existing}
    seen: set[str] = set()
    checked: list[CheckedAction] = []
    for index, item in enumerate(items):
        path = f"actions[{index}]"
        prior = None
        if item.id:
            canonical = normalize_ulid(item.id)
            prior = by_id.get(canonical) if canonical else None
            if prior is None:
                errors.setdefault(f"{path}.id", []).append(
                    f"No action {item.id} on this watch: leave `id` empty for a new action."
                )
                continue
            if prior.id in seen:
                errors.setdefault(f"{path}.id", []).append("The same action appears twice in the chain.")
                continue
            seen.add(prior.id)
        result = check_action(item, prior, path, errors, rules=rules)
        if result is not None:
            checked.append(result)
    return checked, errors


def apply_chain(
    session: Session, watch: Watch, wanted: list[CheckedAction], current: list[WatchAction], now: datetime
) -> list[WatchAction]:
    """Makes the watch's chain `wanted`, in that order: kept actions are updated in place, the others
    deleted (with their runs), new ones inserted. Returns the chain."""
    kept = {item.existing.id for item in wanted if item.existing is not None}
    removed = [action.id for action in current if action.id not in kept]
    if removed:
        session.execute(delete(WatchAction).where(WatchAction.id.in_(removed)))
    if kept:
        session.execute(
            update(WatchAction)
            .where(WatchAction.watch_id == watch.id)
            .values(rank=WatchAction.rank + RANK_OFFSET)
            .execution_options(synchronize_session=False)
        )
    chain: list[WatchAction] = []
    for rank, item in enumerate(wanted):
        action = item.existing
        if action is None:
            action = WatchAction(
                id=new_ulid(),
                account_id=watch.account_id,
                watch_id=watch.id,
                kind=item.kind,
                rank=rank,
                config=item.config,
                created_at=now,
                updated_at=now,
            )
            session.add(action)
        else:
            changed = action.kind != item.kind or action.config != item.config
            session.execute(
                update(WatchAction)
                .where(WatchAction.id == action.id)
                .values(
                    rank=rank,
                    kind=item.kind,
                    config=item.config,
                    **({"updated_at": now} if changed else {}),
                )
                .execution_options(synchronize_session=False)
            )
            # Written by the statement above: the objects learn the values without a second UPDATE.
            set_committed_value(action, "rank", rank)
            set_committed_value(action, "kind", item.kind)
            set_committed_value(action, "config", item.config)
            if changed:
                set_committed_value(action, "updated_at", now)
        chain.append(action)
    session.flush()
    return chain


def preview_chain(watch_id: str | None, wanted: list[CheckedAction]) -> list[WatchActionWire]:
    """The chain a dry run would make, as action wires (new actions have an empty id)."""
    previews = []
    for rank, item in enumerate(wanted):
        action = WatchAction(
            id=item.existing.id if item.existing is not None else "",
            watch_id=watch_id or "",
            kind=item.kind,
            rank=rank,
            config=item.config,
            created_at=item.existing.created_at if item.existing is not None else None,
        )
        previews.append(action_wire(action))
    return previews


# --- one action at a time: /v1/watches/{id}/actions and /v1/actions/{id} ----------------------------


def _lock_watch(session: Session, watch_id: str) -> None:
    session.execute(select(Watch.id).where(Watch.id == watch_id).with_for_update())


def add_action(
    session: Session,
    principal: Principal,
    watch_id: str,
    item: ActionInput,
    *,
    dry_run: bool,
    rules: ActionRules,
    now: datetime,
) -> WatchActionMutationResponse:
    watch = find_watch(session, principal.account.id, watch_id)
    errors: dict[str, list[str]] = {}
    checked = check_action(item, None, "body", errors, rules=rules)
    if checked is None:
        raise invalid(_unprefixed(errors))
    if not dry_run:
        _lock_watch(session, watch.id)
    current = chain_of(session, watch.id)
    # The same cap as a whole chain sent with the watch: adding one at a time must not get past it.
    if len(current) >= MAX_ACTIONS:
        raise invalid({"body": [f"The watch already has {MAX_ACTIONS} actions, the most a chain holds."]})
    at = len(current) if item.rank is None else place(item.rank, len(current))
    wanted = [CheckedAction(a.kind, a.config, a) for a in current]
    wanted.insert(at, checked)
    if dry_run:
        return WatchActionMutationResponse.model_construct(
            action=preview_chain(watch.id, wanted)[at], dry_run=True
        )
    chain = apply_chain(session, watch, wanted, current, now)
    return WatchActionMutationResponse.model_construct(action=action_wire(chain[at]), dry_run=False)


def place(rank: int, size: int) -> int:
    """Where `rank` puts an action among `size` others: any integer is clamped to 0 ... size."""
    return max(0, min(rank, size))


def edit_action(
    session: Session,
    principal: Principal,
    action_id: str,
    item: ActionInput,
    *,
    dry_run: bool,
    rules: ActionRules,
    now: datetime,
) -> WatchActionMutationResponse:
    action = find_action(session, principal.account.id, action_id)
    errors: dict[str, list[str]] = {}
    checked = check_action(item, action, "body", errors, rules=rules)
    if checked is None:
        raise invalid(_unprefixed(errors))
    if not dry_run:
        _lock_watch(session, action.watch_id)
    current = chain_of(session, action.watch_id)
    wanted = [CheckedAction(a.kind, a.config, a) for a in current]
    position = next(i for i, a in enumerate(current) if a.id == action.id)
    moved = wanted.pop(position)
    to = position if item.rank is None else place(item.rank, len(wanted))
    wanted.insert(to, CheckedAction(checked.kind, checked.config, moved.existing))
    if dry_run:
        return WatchActionMutationResponse.model_construct(
            action=preview_chain(action.watch_id, wanted)[to], dry_run=True
        )
    watch = session.get_one(Watch, action.watch_id)
    chain = apply_chain(session, watch, wanted, current, now)
    return WatchActionMutationResponse.model_construct(action=action_wire(chain[to]), dry_run=False)


def delete_action(
    session: Session, principal: Principal, action_id: str, *, dry_run: bool, now: datetime
) -> WatchActionMutationResponse | None:
    """Deletes the action with its runs and deliveries; the chain closes the gap. A dry run returns
    the action that would go."""
    action = find_action(session, principal.account.id, action_id)
    if dry_run:
        return WatchActionMutationResponse.model_construct(action=action_wire(action), dry_run=True)
    _lock_watch(session, action.watch_id)
    current = chain_of(session, action.watch_id)
    wanted = [CheckedAction(a.kind, a.config, a) for a in current if a.id != action.id]
    watch = session.get_one(Watch, action.watch_id)
    apply_chain(session, watch, wanted, current, now)
    return None


def _unprefixed(errors: dict[str, list[str]]) -> dict[str, list[str]]:
    """A single action's body is the action itself: `body.config.url` reads as `config.url`."""
    return {name.removeprefix("body."): messages for name, messages in errors.items()}


def read_action(session: Session, account_id: int, action_id: str) -> WatchActionWire:
    return action_wire(find_action(session, account_id, action_id))
