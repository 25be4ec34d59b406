"""GET, PUT and POST /v1/telemetry (the state and the heartbeat are in telemetry_service.py)."""

from __future__ import annotations

from app.app_state import SettingsDep
from app.feeds.telemetry_service import set_mode, telemetry_state
from app.feeds.wire import TelemetryInput, TelemetryState, TelemetrySwitch
from app.identity.dependencies import V1User
from app.kit.openapi import request_body
from app.kit.v1_input import validate
from app.kit.v1_request import JsonBody
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.request_sessions import SessionDep

router = V1Router(tags=["Telemetry"])


@router.get("/v1/telemetry", response_model=TelemetryState, summary="The telemetry state")
def get_telemetry(settings: SettingsDep, session: SessionDep, principal: V1User) -> TelemetryState:
    return telemetry_state(session, principal, settings)


@router.put(
    "/v1/telemetry",
    openapi_extra=request_body(TelemetryInput),
    response_model=TelemetryState,
    summary="Turn telemetry on or off (staff only)",
    responses={
        400: {"model": ErrorOut, "description": "`mode` is not `on` or `off`"},
        403: {"model": ErrorOut, "description": "The caller is not staff (`can_set` is false)"},
    },
)
def put_telemetry(
    settings: SettingsDep, session: SessionDep, principal: V1User, body: JsonBody
) -> TelemetryState:
    wanted = validate(TelemetryInput, body)
    set_mode(session, principal, wanted.mode)
    return telemetry_state(session, principal, settings)


@router.post(
    "/v1/telemetry",
    openapi_extra=request_body(TelemetrySwitch),
    response_model=TelemetryState,
    summary="Turn telemetry on or off with `enabled` (openmagpie's form; staff only)",
    responses={
        400: {"model": ErrorOut, "description": "`enabled` is not a boolean"},
        403: {"model": ErrorOut, "description": "The caller is not staff (`can_set` is false)"},
    },
)
def post_telemetry(
    settings: SettingsDep, session: SessionDep, principal: V1User, body: JsonBody
) -> TelemetryState:
    wanted = validate(TelemetrySwitch, body)
    set_mode(session, principal, "on" if wanted.enabled else "off")
    return telemetry_state(session, principal, settings)
