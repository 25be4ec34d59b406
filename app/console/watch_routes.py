"""The console's Watches: the list, and a watch's chain of actions in order, edited in place (add, move
up or down, remove, each action's config as a form drawn from its kind's config model, refused with the
API's own messages beside the fields), an action's runs with what each did, and its activity over the
chosen window as a chart. Every write is the /v1 chain service's, checked by the same rules."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from app.app_state import app_state
from app.console import action_forms
from app.console.charts import Bar, bar_chart
from app.console.pages import CONSOLE, ConsoleUser, PostedForm, messages_of
from app.identity.origin_guard import check_cookie_origin
from app.kit.errors import DomainError
from app.kit.time import utcnow
from app.kit.v1_input import Cursor, validate
from app.models.states import ActionKind
from app.watches import activity_service, chain_service, watch_service
from app.watches.actions import ACTIONS
from app.watches.dependencies import engines_of, rules_of
from app.watches.specs import ActionInput, WatchPatch

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_cookie_origin)])
WATCHES = CONSOLE + "/watches"
WATCHES_PER_PAGE = 100
RUNS_PER_PAGE = 50


def _watch_page(
    request: Request,
    me: ConsoleUser,
    watch_id: str,
    *,
    action_id: str = "",
    window: str = "",
    refused: tuple[str, dict[str, str], DomainError] | None = None,
) -> Response:
    """The watch's page; `refused` is the form the API's rules refused (its key, what was posted, the
    refusal), drawn again with what was typed and each message beside its field."""
    watch = watch_service.read_watch(me.db, me.account_id, watch_id)
    actions = watch.actions
    chosen = next((a for a in actions if a.id == action_id), actions[0] if actions else None)
    runs, chart, summary = None, None, None
    window = window if window in activity_service.WINDOWS else activity_service.DEFAULT_WINDOW
    if chosen is not None:
        runs = activity_service.run_page(
            me.db,
            me.account_id,
            chosen.id,
            Cursor(RUNS_PER_PAGE, None),
            state=None,
            window=window,
            now=utcnow(),
        )
        summary = runs.summary
        bars = [Bar(state, count) for state, count in summary.evaluated.items()] if summary else []
        chart = bar_chart(bars, title=f"Runs completed in the last {window}, by result")
    deliveries = None
    if chosen is not None and chosen.kind == ActionKind.WEBHOOK:
        cursor = Cursor(RUNS_PER_PAGE, None)
        deliveries = activity_service.delivery_page(me.db, me.account_id, chosen.id, cursor, state=None)
    failed_key, posted, error = refused or ("", {}, None)
    by_field, _rest = action_forms.errors_by_field(error.errors or {}) if error else ({}, [])

    def fields(key: str, kind: str, config: dict[str, Any] | None) -> list[action_forms.Shown]:
        if key == failed_key:
            return action_forms.shown_fields(kind, key, posted, by_field)
        return action_forms.shown_fields(kind, key, action_forms.values_of_config(kind, config), {})

    engine_problem = engines_of(app_state(request)).setup_problem("")
    new_kinds = [
        {
            "kind": str(kind),
            "fields": fields(f"new-{kind}", str(kind), None),
            "engine_problem": engine_problem if ACTIONS[kind].uses_engine else None,
        }
        for kind in ActionKind
    ]
    return me.page(
        "watches/watch.html",
        section="watches",
        status=400 if error else 200,
        watch=watch,
        actions=actions,
        forms={a.id: fields(a.id, a.kind, a.config) for a in actions},
        new_kinds=new_kinds,
        failed_key=failed_key,
        chosen=chosen,
        runs=runs,
        deliveries=deliveries,
        summary=summary,
        chart=chart,
        window=window,
        windows=activity_service.WINDOWS,
        errors=messages_of(error) if error else [],
    )


@router.get(WATCHES)
def watches_page(me: ConsoleUser, after: str | None = None) -> Response:
    page = watch_service.list_watches(me.db, me.account_id, Cursor(WATCHES_PER_PAGE, after))
    return me.page("watches/list.html", section="watches", watches=page.items, next_cursor=page.next_cursor)


@router.get(WATCHES + "/{watch_id}")
def watch_page(
    watch_id: str, request: Request, me: ConsoleUser, action: str = "", window: str = ""
) -> Response:
    return _watch_page(request, me, watch_id, action_id=action, window=window)


@router.post(WATCHES + "/{watch_id}/actions")
def add_action_submit(watch_id: str, request: Request, me: ConsoleUser, form: PostedForm) -> Response:
    kind = form.text("kind")
    if kind not in {str(known) for known in ActionKind}:
        raise DomainError(400, f"Unknown action kind {kind!r}.")
    try:
        item = validate(ActionInput, {"kind": kind, "config": action_forms.config_of_form(kind, form)})
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
        posted = action_forms.values_of_form(kind, form)
        return _watch_page(request, me, watch_id, refused=(f"new-{kind}", posted, refused))
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
        config = action_forms.config_of_form(action.kind, form)
        _edit(me, request, watch_id, action_id, {"kind": action.kind, "config": config})
    except DomainError as refused:
        if refused.status == 404:
            raise
        posted = action_forms.values_of_form(action.kind, form)
        return _watch_page(request, me, watch_id, action_id=action_id, refused=(action_id, posted, refused))
    return me.redirect(f"{WATCHES}/{watch_id}?action={action_id}")


@router.post(WATCHES + "/{watch_id}/actions/{action_id}/move")
def move_action_submit(
    watch_id: str, action_id: str, request: Request, me: ConsoleUser, form: PostedForm
) -> Response:
    actions = watch_service.read_watch(me.db, me.account_id, watch_id).actions
    position = next((i for i, a in enumerate(actions) if a.id == action_id), None)
    if position is None:
        raise DomainError(404, f"No action {action_id} in this watch.")
    to = position - 1 if form.text("direction") == "up" else position + 1
    action = actions[position]
    # The config as the API shows it (a webhook's secrets masked): the chain service restores them.
    _edit(me, request, watch_id, action_id, {"kind": action.kind, "config": action.config, "rank": to})
    return me.redirect(f"{WATCHES}/{watch_id}")


@router.post(WATCHES + "/{watch_id}/actions/{action_id}/delete")
def delete_action_submit(watch_id: str, action_id: str, me: ConsoleUser) -> Response:
    chain_service.delete_action(me.db, me.principal, action_id, dry_run=False, now=utcnow())
    return me.redirect(f"{WATCHES}/{watch_id}")


@router.post(WATCHES + "/{watch_id}/active")
def pause_or_resume_submit(watch_id: str, request: Request, me: ConsoleUser, form: PostedForm) -> Response:
    """Pause or resume, as PATCH /v1/watches/{id} with `is_active` (resuming checks the chain again)."""
    try:
        watch_service.edit_watch(
            me.db,
            me.principal,
            watch_id,
            WatchPatch(is_active=form.text("active") == "true"),
            dry_run=False,
            rules=rules_of(app_state(request), me.db, me.principal),
            now=utcnow(),
        )
    except DomainError as refused:
        if refused.status == 404:
            raise
        return _watch_page(request, me, watch_id, refused=("", {}, refused))
    return me.redirect(f"{WATCHES}/{watch_id}")


@router.post(WATCHES + "/{watch_id}/delete")
def delete_watch_submit(watch_id: str, me: ConsoleUser) -> Response:
    watch_service.delete_watch(me.db, me.principal, watch_id, dry_run=False)
    return me.redirect(WATCHES)
