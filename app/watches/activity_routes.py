"""An action's activity (its runs) and deliveries, one run and one delivery: thin routes over
activity_service."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response

from app.identity.dependencies import V1User
from app.kit.openapi import query_parameter, query_parameters
from app.kit.responses import timestamped_json_response
from app.kit.time import utcnow
from app.kit.v1_request import PageCursor
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.kit.windows import WINDOW_PARAMS
from app.models import DeliveryState, RunState
from app.request_sessions import SessionDep
from app.watches import activity_service
from app.watches.wire import (
    WatchActionDeliveryListResponse,
    WatchActionDeliveryView,
    WatchActionRunListResponse,
    WatchActionRunView,
)

router = V1Router(tags=["Activity"])

NOT_ACTION: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "An unknown `state` or `window`"},
    404: {"model": ErrorOut, "description": "No such action in the account"},
}
RUN_FILTERS = query_parameters(
    query_parameter(
        "state", {"type": "string", "enum": [state.value for state in RunState]}, "Only runs in this state"
    ),
    query_parameter(
        "window",
        {
            "type": "string",
            "enum": list(activity_service.WINDOWS),
            "default": activity_service.DEFAULT_WINDOW,
        },
        "The summary's window (first page only)",
    ),
    *(
        query_parameter(name, {"type": "string"}, "A bound of the runs listed (see the description)")
        for name in WINDOW_PARAMS
    ),
)
DELIVERY_FILTERS = query_parameters(
    query_parameter(
        "state",
        {"type": "string", "enum": [state.value for state in DeliveryState]},
        "Only deliveries in this state",
    )
)


@router.get(
    "/v1/actions/{action_id}/activity",
    response_model=WatchActionRunListResponse,
    summary="An action's runs, newest first",
    description="`?state=` keeps runs in one state; `?window=` (24h, yesterday, 7d, 30d; default 7d) "
    "picks the summary's window. The first page (no `after`) carries the summary; `feeds` and "
    "`feed_items` describe the items the runs worked on (an item pruned by retention is absent). "
    "`?completed_since=`, `?completed_until=`, `?occurred_since=` and `?occurred_until=` keep the runs "
    "completed, or whose item occurred, within `[since, until)`: each a keyword (`now`, `today`, "
    "`yesterday`, `this-week`), a duration back from now (`7d`) or an ISO 8601 date-time; an `until` "
    "alone starts 7 days before it.",
    responses=NOT_ACTION,
    openapi_extra=RUN_FILTERS,
)
def action_activity(
    action_id: str, request: Request, session: SessionDep, principal: V1User, cursor: PageCursor
) -> Response:
    params = request.query_params
    page = activity_service.run_page(
        session,
        principal.account.id,
        action_id,
        cursor,
        state=params.get("state"),
        window=params.get("window"),
        now=utcnow(),
        bounds={name: params[name] for name in WINDOW_PARAMS if name in params},
    )
    return timestamped_json_response(page)


@router.get(
    "/v1/action-activity/{run_id}",
    response_model=WatchActionRunView,
    summary="One run with its action, feed and item",
    description="`feed_item` is null once retention pruned the item.",
    responses={404: {"model": ErrorOut, "description": "No such run in the account"}},
)
def run_detail(run_id: str, session: SessionDep, principal: V1User) -> Response:
    return timestamped_json_response(activity_service.read_run(session, principal.account.id, run_id))


@router.get(
    "/v1/actions/{action_id}/deliveries",
    response_model=WatchActionDeliveryListResponse,
    summary="A webhook action's deliveries (one per attempt), newest first",
    description="`?state=` keeps deliveries in one state (pending, succeeded, errored, failed).",
    responses=NOT_ACTION,
    openapi_extra=DELIVERY_FILTERS,
)
def action_deliveries(
    action_id: str, request: Request, session: SessionDep, principal: V1User, cursor: PageCursor
) -> Response:
    page = activity_service.delivery_page(
        session, principal.account.id, action_id, cursor, state=request.query_params.get("state")
    )
    return timestamped_json_response(page)


@router.get(
    "/v1/action-deliveries/{delivery_id}",
    response_model=WatchActionDeliveryView,
    summary="One delivery with the exact body sent (never its headers)",
    responses={404: {"model": ErrorOut, "description": "No such delivery in the account"}},
)
def delivery_detail(delivery_id: str, session: SessionDep, principal: V1User) -> Response:
    return timestamped_json_response(
        activity_service.delivery_detail(session, principal.account.id, delivery_id)
    )
