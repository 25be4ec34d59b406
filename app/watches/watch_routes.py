"""/v1/watches and /v1/watches/{id}/actions: thin routes over watch_service and chain_service."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response

from app.identity.dependencies import V1User
from app.kit.openapi import request_body
from app.kit.responses import timestamped_json_response
from app.kit.time import utcnow
from app.kit.v1_input import validate
from app.kit.v1_request import DryRun, JsonBody, PageCursor
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.request_sessions import SessionDep
from app.watches import chain_service, watch_service
from app.watches.dependencies import action_rules
from app.watches.specs import ActionInput, WatchInput, WatchPatch
from app.watches.wire import (
    WatchActionListResponse,
    WatchActionMutationResponse,
    WatchListResponse,
    WatchMutationResponse,
    WatchView,
)

router = V1Router(tags=["Watches"])

INVALID: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Invalid input; `detail` names each field"}
}
MISSING: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No such watch in the account"}
}
DRY_RUN_NOTE = " With `?dry_run=true` (1, true, yes, on) everything is validated and nothing is stored."
CHAIN_NOTE = (
    " `actions` is the ordered chain: an action with an `id` is that existing action, kept with its "
    "history (a webhook secret sent back masked keeps its stored value); one without is new."
)


@router.get("/v1/watches", response_model=WatchListResponse, summary="List watches, newest first")
def list_watches(session: SessionDep, principal: V1User, cursor: PageCursor) -> Response:
    return timestamped_json_response(watch_service.list_watches(session, principal.account.id, cursor))


@router.post(
    "/v1/watches",
    openapi_extra=request_body(WatchInput),
    response_model=WatchMutationResponse,
    status_code=201,
    summary="Create a watch with its feeds and action chain",
    description="201 with the watch; a dry run answers 200 with `id` null." + CHAIN_NOTE + DRY_RUN_NOTE,
    responses={200: {"model": WatchMutationResponse, "description": "Dry run"}, **INVALID},
)
def create_watch(
    request: Request, session: SessionDep, principal: V1User, body: JsonBody, dry_run: DryRun
) -> Response:
    watch_input = validate(WatchInput, body)
    created = watch_service.create_watch(
        session,
        principal,
        watch_input,
        dry_run=dry_run,
        rules=action_rules(request, session, principal),
        now=utcnow(),
    )
    return timestamped_json_response(created, status_code=200 if dry_run else 201)


@router.get(
    "/v1/watches/{watch_id}",
    response_model=WatchView,
    summary="A watch with its action chain",
    responses=MISSING,
)
def get_watch(watch_id: str, session: SessionDep, principal: V1User) -> Response:
    return timestamped_json_response(watch_service.read_watch(session, principal.account.id, watch_id))


@router.put(
    "/v1/watches/{watch_id}",
    openapi_extra=request_body(WatchInput),
    response_model=WatchMutationResponse,
    summary="Edit a watch",
    description="Replaces name and is_active; `feed_ids` and `actions`, when given, replace the "
    "subscription set and the chain (absent, they stay)." + CHAIN_NOTE + DRY_RUN_NOTE,
    responses={**INVALID, **MISSING},
)
def edit_watch(
    watch_id: str, request: Request, session: SessionDep, principal: V1User, body: JsonBody, dry_run: DryRun
) -> Response:
    watch_input = validate(WatchInput, body)
    edited = watch_service.edit_watch(
        session,
        principal,
        watch_id,
        watch_input,
        dry_run=dry_run,
        rules=action_rules(request, session, principal),
        now=utcnow(),
    )
    return timestamped_json_response(edited)


@router.patch(
    "/v1/watches/{watch_id}",
    openapi_extra=request_body(WatchPatch),
    response_model=WatchMutationResponse,
    summary="Change some of a watch's settings (name, is_active, feed_ids)",
    description="A paused watch (`is_active` false) skips the runs it had queued and starts none for "
    "new items until it is resumed." + DRY_RUN_NOTE,
    responses={**INVALID, **MISSING},
)
def patch_watch(
    watch_id: str, request: Request, session: SessionDep, principal: V1User, body: JsonBody, dry_run: DryRun
) -> Response:
    patch = validate(WatchPatch, body)
    edited = watch_service.edit_watch(
        session,
        principal,
        watch_id,
        patch,
        dry_run=dry_run,
        rules=action_rules(request, session, principal),
        now=utcnow(),
    )
    return timestamped_json_response(edited)


@router.delete(
    "/v1/watches/{watch_id}",
    status_code=204,
    response_model=None,
    summary="Delete a watch with its actions, runs and deliveries",
    description="204; a dry run answers 200 with the watch that would be deleted.",
    responses={200: {"model": WatchMutationResponse, "description": "Dry run"}, **MISSING},
)
def delete_watch(watch_id: str, session: SessionDep, principal: V1User, dry_run: DryRun) -> Response:
    preview = watch_service.delete_watch(session, principal, watch_id, dry_run=dry_run)
    if preview is not None:
        return timestamped_json_response(preview)
    return Response(status_code=204)


@router.get(
    "/v1/watches/{watch_id}/actions",
    response_model=WatchActionListResponse,
    summary="A watch's action chain, in rank order",
    responses=MISSING,
)
def list_actions(watch_id: str, session: SessionDep, principal: V1User) -> Response:
    return timestamped_json_response(watch_service.list_actions(session, principal.account.id, watch_id))


@router.post(
    "/v1/watches/{watch_id}/actions",
    openapi_extra=request_body(ActionInput),
    response_model=WatchActionMutationResponse,
    status_code=201,
    summary="Add an action to a watch's chain",
    description="`rank` inserts it there (0 is first), moving the later ones down; without one it is "
    "appended. 201; a dry run answers 200 with `action.id` empty." + DRY_RUN_NOTE,
    responses={200: {"model": WatchActionMutationResponse, "description": "Dry run"}, **INVALID, **MISSING},
)
def add_action(
    watch_id: str, request: Request, session: SessionDep, principal: V1User, body: JsonBody, dry_run: DryRun
) -> Response:
    item = validate(ActionInput, body)
    added = chain_service.add_action(
        session,
        principal,
        watch_id,
        item,
        dry_run=dry_run,
        rules=action_rules(request, session, principal),
        now=utcnow(),
    )
    return timestamped_json_response(added, status_code=200 if dry_run else 201)
