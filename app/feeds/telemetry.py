"""GET|PUT /v1/telemetry: the installation's telemetry choice (TelemetryState).

Telemetry is off until a staff user turns it on, and nothing is sent while it is off. `emitting` says
whether an event would be sent now: the mode is `on` and a destination is configured
(TIDINGS_TELEMETRY_URL). What is sent, at most once a day, is a count of feeds and sources by kind
with a random installation id: no names, URLs, addresses or content.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import Request
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import SessionDep
from app.feeds.auth import FeedUser
from app.feeds.input import JsonBody, validate
from app.feeds.routing import FeedRouter
from app.feeds.wire import ErrorOut, TelemetryInput, TelemetryState
from app.identity.principal import Principal
from app.kit.errors import Forbidden
from app.kit.time import utcnow
from app.models import Feed, Source, TelemetrySetting

router = FeedRouter(tags=["Telemetry"])

SETTING_ID = 1


def current_mode(session: Session) -> str:
    row = session.get(TelemetrySetting, SETTING_ID)
    return row.mode if row is not None else "off"


def telemetry_state(session: Session, principal: Principal, settings: Settings) -> dict[str, Any]:
    mode = current_mode(session)
    return {
        "mode": mode,
        "can_set": principal.user.is_staff,
        "emitting": mode == "on" and bool(settings.telemetry_url),
    }


def set_mode(session: Session, principal: Principal, mode: str) -> None:
    if not principal.user.is_staff:
        raise Forbidden("Only staff users may change the installation's telemetry.")
    row = session.get(TelemetrySetting, SETTING_ID)
    now = utcnow()
    if row is None:
        row = TelemetrySetting(id=SETTING_ID, installation_id=str(uuid.uuid4()), created_at=now)
        session.add(row)
    row.mode = mode
    row.updated_by_user_id = principal.user.id
    row.updated_at = now
    session.flush()


def usage_counts(session: Session) -> dict[str, Any]:
    """The whole of a telemetry event's content."""
    by_kind = dict(session.execute(select(Source.kind, func.count()).group_by(Source.kind)).all())
    feeds = session.scalar(select(func.count()).select_from(Feed)) or 0
    return {"feeds": feeds, "sources_by_kind": {str(k): int(v) for k, v in by_kind.items()}}


@router.get("/v1/telemetry", response_model=TelemetryState, summary="The telemetry state")
def get_telemetry(request: Request, session: SessionDep, principal: FeedUser) -> dict[str, Any]:
    return telemetry_state(session, principal, request.app.state.settings)


@router.put(
    "/v1/telemetry",
    response_model=TelemetryState,
    summary="Turn telemetry on or off (staff only)",
    responses={
        400: {"model": ErrorOut, "description": "`mode` is not `on` or `off`"},
        403: {"model": ErrorOut, "description": "The caller is not staff (`can_set` is false)"},
    },
)
def put_telemetry(
    request: Request, session: SessionDep, principal: FeedUser, body: JsonBody
) -> dict[str, Any]:
    wanted = validate(TelemetryInput, body)
    set_mode(session, principal, wanted.mode)
    return telemetry_state(session, principal, request.app.state.settings)
