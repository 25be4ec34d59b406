"""The console's Watches: the list, and a watch's chain of actions in order, edited in place (add, move
up or down, remove, each action's config edited as the JSON the API takes, refused with the API's own
messages), an action's runs with what each did, and its activity over the chosen window as a chart.
Every write is the /v1 chain service's, checked by the same rules."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from app.console.charts import Bar, bar_chart
from app.console.pages import CONSOLE, ConsoleUser, PostedForm, messages_of
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.kit.time import utcnow
from app.kit.v1_input import Cursor, invalid, validate
from app.models.states import ActionKind
from app.state import app_state
from app.watches import activity_service, chain_service, watch_service
from app.watches.dependencies import rules_of
from app.watches.specs import ActionInput

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
WATCHES = CONSOLE + "/watches"
WATCHES_PER_PAGE = 100
RUNS_PER_PAGE = 50


def _config_of(form: PostedForm) -> Any:
    try:
        return json.loads(form.get("config") or "{}")
    except ValueError:
        raise invalid({"config": ['Must be a JSON object, such as {"prefix": "[rust]"}.']}) from None


def _watch_page(
    me: ConsoleUser,
    watch_id: str,
    *,
    action_id: str = "",
    window: str = "",
    errors: list[str] | None = None,
    drafts: dict[str, str] | None = None,
) -> Response:
    watch = watch_service.read_watch(me.db, me.account_id, watch_id)
    actions = watch["actions"]
    chosen = next((a for a in actions if a["id"] == action_id), actions[0] if actions else None)
    runs, chart, summary = None, None, None
    window = window if window in activity_service.WINDOWS else activity_service.DEFAULT_WINDOW
    if chosen is not None:
        runs = activity_service.run_page(
            me.db,
            me.account_id,
            chosen["id"],
            Cursor(RUNS_PER_PAGE, None),
            state=None,
            window=window,
            now=utcnow(),
        )
        summary = runs["summary"]
        bars = [Bar(state, count) for state, count in summary["evaluated"].items()]
        chart = bar_chart(bars, title=f"Runs completed in the last {window}, by result")
    configs = {a["id"]: json.dumps(a["config"], indent=2, ensure_ascii=False) for a in actions}
    configs.update(drafts or {})
    return me.page(
        "watches/watch.html",
        section="watches",
        status=400 if errors else 200,
        watch=watch,
        actions=actions,
        configs=configs,
        chosen=chosen,
        runs=runs,
        summary=summary,
        chart=chart,
        window=window,
        windows=activity_service.WINDOWS,
        kinds=[str(kind) for kind in ActionKind],
        errors=errors or [],
    )


@router.get(WATCHES)
def watches_page(me: ConsoleUser, after: str | None = None) -> Response:
    page = watch_service.list_watches(me.db, me.account_id, Cursor(WATCHES_PER_PAGE, after))
    return me.page(
        "watches/list.html", section="watches", watches=page["items"], next_cursor=page["next_cursor"]
    )


@router.get(WATCHES + "/{watch_id}")
def watch_page(watch_id: str, me: ConsoleUser, action: str = "", window: str = "") -> Response:
    return _watch_page(me, watch_id, action_id=action, window=window)


@router.post(WATCHES + "/{watch_id}/actions")
def add_action_submit(watch_id: str, request: Request, me: ConsoleUser, form: PostedForm) -> Response:
    try:
        item = validate(ActionInput, {"kind": form.text("kind"), "config": _config_of(form)})
        chain_service.add_action(
            me.db,
            me.principal,
            watch_id,
            item,
            dry_run=False,
            rules=rules_of(app_state(request), me.db, me.principal),
            now=utcnow(),
        )
    except DomainError as refused:
        if refused.status == 404:
            raise
        return _watch_page(me, watch_id, errors=messages_of(refused), drafts={"new": form.get("config")})
    return me.redirect(f"{WATCHES}/{watch_id}")


def _edit(me: ConsoleUser, request: Request, watch_id: str, action_id: str, body: dict[str, Any]) -> None:
    chain_service.edit_action(
        me.db,
        me.principal,
        action_id,
        validate(ActionInput, body),
        dry_run=False,
        rules=rules_of(app_state(request), me.db, me.principal),
        now=utcnow(),
    )


@router.post(WATCHES + "/{watch_id}/actions/{action_id}")
def edit_action_submit(
    watch_id: str, action_id: str, request: Request, me: ConsoleUser, form: PostedForm
) -> Response:
    action = chain_service.read_action(me.db, me.account_id, action_id)
    try:
        _edit(me, request, watch_id, action_id, {"kind": action["kind"], "config": _config_of(form)})
    except DomainError as refused:
        if refused.status == 404:
            raise
        drafts = {action_id: form.get("config")}
        return _watch_page(me, watch_id, action_id=action_id, errors=messages_of(refused), drafts=drafts)
    return me.redirect(f"{WATCHES}/{watch_id}?action={action_id}")


@router.post(WATCHES + "/{watch_id}/actions/{action_id}/move")
def move_action_submit(
    watch_id: str, action_id: str, request: Request, me: ConsoleUser, form: PostedForm
) -> Response:
    actions = watch_service.read_watch(me.db, me.account_id, watch_id)["actions"]
    position = next((i for i, a in enumerate(actions) if a["id"] == action_id), None)
    if position is None:
        raise DomainError(404, f"No action {action_id} in this watch.")
    to = position - 1 if form.text("direction") == "up" else position + 1
    action = actions[position]
    # The config as the API shows it (a webhook's secrets masked): the chain service restores them.
    _edit(me, request, watch_id, action_id, {"kind": action["kind"], "config": action["config"], "rank": to})
    return me.redirect(f"{WATCHES}/{watch_id}")


@router.post(WATCHES + "/{watch_id}/actions/{action_id}/delete")
def delete_action_submit(watch_id: str, action_id: str, me: ConsoleUser) -> Response:
    chain_service.delete_action(me.db, me.principal, action_id, dry_run=False, now=utcnow())
    return me.redirect(f"{WATCHES}/{watch_id}")


@router.post(WATCHES + "/{watch_id}/delete")
def delete_watch_submit(watch_id: str, me: ConsoleUser) -> Response:
    watch_service.delete_watch(me.db, me.principal, watch_id, dry_run=False)
    return me.redirect(WATCHES)
