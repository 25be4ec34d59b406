"""GET|PUT /v1/telemetry: the installation's telemetry choice (TelemetryState).

Telemetry is off until a staff user turns it on, and nothing is sent while it is off. `emitting` says
whether an event would be sent now: the mode is `on` and a destination is configured
(TIDINGS_TELEMETRY_URL). What is sent, at most once a day, is a count of feeds and sources by kind
with a random installation id: no names, URLs, addresses or content.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib.metadata import PackageNotFoundError, version

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.config import Settings
from app.feeds.wire import TelemetryState
from app.identity.principal import Principal
from app.kit.errors import Forbidden
from app.kit.time import utcnow
from app.models import Feed, Source, TelemetrySetting

SETTING_ID = 1


def current_mode(session: Session) -> str:
    row = session.get(TelemetrySetting, SETTING_ID)
    return row.mode if row is not None else "off"


def telemetry_state(session: Session, principal: Principal, settings: Settings) -> TelemetryState:
    mode = current_mode(session)
    return TelemetryState(
        mode=mode, can_set=principal.user.is_staff, emitting=mode == "on" and bool(settings.telemetry_url)
    )


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


def heartbeat_due(session: Session, now: datetime, every: timedelta) -> bool:
    row = session.get(TelemetrySetting, SETTING_ID)
    if row is None or row.mode != "on":
        return False
    return row.last_sent_at is None or now - row.last_sent_at >= every


@dataclass(frozen=True, slots=True)
class TelemetryEvent:
    """The whole of a telemetry event (sent as JSON): counts and a random installation id."""

    event: str
    installation_id: str
    version: str
    feeds: int
    sources_by_kind: dict[str, int]


def telemetry_event(session: Session) -> TelemetryEvent | None:
    """The event to send now; None while telemetry is off."""
    row = session.get(TelemetrySetting, SETTING_ID)
    if row is None or row.mode != "on":
        return None
    by_kind = dict(session.execute(select(Source.kind, func.count()).group_by(Source.kind)).all())
    feeds = session.scalar(select(func.count()).select_from(Feed)) or 0
    return TelemetryEvent(
        event="heartbeat",
        installation_id=row.installation_id,
        version=_release(),
        feeds=int(feeds),
        sources_by_kind={str(kind): int(count) for kind, count in by_kind.items()},
    )


def mark_sent(session: Session, now: datetime) -> None:
    row = session.get(TelemetrySetting, SETTING_ID)
    if row is not None:
        row.last_sent_at = now


def _release() -> str:
    try:
        return version("tidings")
    except PackageNotFoundError:
        return "0"
