"""POST /v1/actions/{id}/backfill and GET /v1/action-backfills[/{id}]: thin routes over
backfill_service."""

from __future__ import annotations

from fastapi import Response

from app.identity.dependencies import V1User
from app.kit.openapi import request_body
from app.kit.responses import timestamped_json_response
from app.kit.time import utcnow
from app.kit.v1_input import validate
from app.kit.v1_request import DryRun, JsonBody, PageCursor
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.request_sessions import SessionDep
from app.watches import backfill_service
from app.watches.specs import BackfillInput
from app.watches.wire import BackfillJob, BackfillListResponse, BackfillPreview

router = V1Router(tags=["Activity"])


@router.post(
    "/v1/actions/{action_id}/backfill",
    openapi_extra=request_body(BackfillInput),
    response_model=BackfillJob,
    status_code=201,
    summary="Run an action again over the items its previous step passed within a window",
    description="The window is `completed_since`/`completed_until` (when the previous step's run "
    "completed; for a chain's first action, when the item was collected) and/or "
    "`occurred_since`/`occurred_until` (when the item occurred), written as for the activity list; "
    "one bound at least. Items the action never ran on get a run; with `replace`, its finished runs "
    "and those of later actions on the items are deleted first. Done in the request (201, `state: "
    "done`); a dry run (`?dry_run=true`) answers 200 with the counts and stores nothing.",
    responses={
        200: {"model": BackfillPreview, "description": "Dry run"},
        400: {"model": ErrorOut, "description": "No window, or a bound that cannot be read"},
        404: {"model": ErrorOut, "description": "No such action in the account"},
    },
)
def submit_backfill(
    action_id: str, session: SessionDep, principal: V1User, body: JsonBody, dry_run: DryRun
) -> Response:
    wanted = validate(BackfillInput, body)
    bounds = {
        name: value
        for name, value in wanted.model_dump(exclude={"replace"}).items()
        if isinstance(value, str) and value
    }
    answer = backfill_service.backfill(
        session,
        principal.account.id,
        action_id,
        bounds,
        replace=wanted.replace,
        dry_run=dry_run,
        now=utcnow(),
    )
    return timestamped_json_response(answer, status_code=200 if dry_run else 201)


@router.get(
    "/v1/action-backfills",
    response_model=BackfillListResponse,
    summary="The account's backfills, newest first",
)
def list_backfills(session: SessionDep, principal: V1User, cursor: PageCursor) -> Response:
    return timestamped_json_response(backfill_service.backfill_page(session, principal.account.id, cursor))


@router.get(
    "/v1/action-backfills/{backfill_id}",
    response_model=BackfillJob,
    summary="One backfill",
    responses={404: {"model": ErrorOut, "description": "No such backfill in the account"}},
)
def get_backfill(backfill_id: str, session: SessionDep, principal: V1User) -> Response:
    return timestamped_json_response(
        backfill_service.find_backfill(session, principal.account.id, backfill_id)
    )
