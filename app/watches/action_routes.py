"""/v1/actions/{id}: read, edit (PUT) and delete one action of a chain; thin routes over chain_service."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response

from app.identity.dependencies import V1User
from app.kit.openapi import request_body
from app.kit.responses import timestamped_json_response
from app.kit.time import utcnow
from app.kit.v1_input import validate
from app.kit.v1_request import DryRun, JsonBody
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.request_sessions import SessionDep
from app.watches import chain_service
from app.watches.dependencies import action_rules
from app.watches.specs import ActionInput
from app.watches.wire import WatchActionMutationResponse, WatchActionWire

router = V1Router(tags=["Watches"])

MISSING: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No such action in the account"}
}


@router.get(
    "/v1/actions/{action_id}", response_model=WatchActionWire, summary="One action", responses=MISSING
)
def get_action(action_id: str, session: SessionDep, principal: V1User) -> Response:
    return timestamped_json_response(chain_service.read_action(session, principal.account.id, action_id))


@router.put(
    "/v1/actions/{action_id}",
    openapi_extra=request_body(ActionInput),
    response_model=WatchActionMutationResponse,
    summary="Edit an action",
    description="Replaces its kind and config (a webhook secret sent back masked keeps its stored "
    "value); `rank`, when given, moves it in the chain. With `?dry_run=true` nothing is stored.",
    responses={
        400: {"model": ErrorOut, "description": "Invalid input; `detail` names each field"},
        **MISSING,
    },
)
def edit_action(
    action_id: str,
    request: Request,
    session: SessionDep,
    principal: V1User,
    body: JsonBody,
    dry_run: DryRun,
) -> Response:
    item = validate(ActionInput, body)
    edited = chain_service.edit_action(
        session,
        principal,
        action_id,
        item,
        dry_run=dry_run,
        rules=action_rules(request, session, principal),
        now=utcnow(),
    )
    return timestamped_json_response(edited)


@router.delete(
    "/v1/actions/{action_id}",
    status_code=204,
    response_model=None,
    summary="Delete an action with its runs and deliveries",
    description="204; the later actions move up. A dry run answers 200 with the action that would go.",
    responses={200: {"model": WatchActionMutationResponse, "description": "Dry run"}, **MISSING},
)
def delete_action(action_id: str, session: SessionDep, principal: V1User, dry_run: DryRun) -> Response:
    preview = chain_service.delete_action(session, principal, action_id, dry_run=dry_run, now=utcnow())
    if preview is not None:
        return timestamped_json_response(preview)
    return Response(status_code=204)
