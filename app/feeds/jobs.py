"""The feed domain's background jobs, registered by app/scheduler.py: polling, retention, telemetry."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import transaction
from app.feeds.poll_queue import OnNewItems
from app.feeds.poller import FeedPoller
from app.feeds.telemetry_service import TelemetryEvent, heartbeat_due, mark_sent, telemetry_event
from app.kit.jobs import Job, JobSet
from app.kit.safe_http import OutboundError
from app.kit.time import utcnow

log = logging.getLogger("tidings.feeds.jobs")

TELEMETRY_EVERY = timedelta(days=1)


class FeedJobs(JobSet):
    """The jobs and what they share (one poller, hence one HTTP client, per process). `on_new_items`
    is the poller's hook for the items each poll stores (see poll_queue.OnNewItems)."""

    def __init__(
        self, settings: Settings, session_factory: sessionmaker[Session], *, on_new_items: OnNewItems
    ) -> None:
        self.settings = settings
        self.session_factory = session_factory
        self.poller = FeedPoller(settings, session_factory, on_new_items=on_new_items)

    def jobs(self) -> list[Job]:
        return [
            Job("feed polling", 1.0, self.poller.run_once),
            Job("feed retention", 3600.0, self.prune),
            Job("telemetry", 3600.0, self.send_telemetry),
        ]

    async def prune(self) -> int:
        pruned = await self.poller.prune()
        if pruned:
            log.info("pruned %d feed items past their feed's retention", pruned)
        return 0  # never a reason to run again at once

    async def send_telemetry(self) -> int:
        """At most one event a day, only while someone opted in and a destination is configured."""
        if not self.settings.telemetry_url:
            return 0
        now = utcnow()
        # The transactions run in a worker thread: their I/O must not block the event loop.
        event = await asyncio.to_thread(self._due_event, now)
        if event is None:
            return 0
        try:
            response = await self.poller.http.request(
                "POST", self.settings.telemetry_url, json=asdict(event), timeout=30
            )
        except OutboundError as exc:
            log.info("telemetry event not sent: %s", exc)
            return 0
        if 200 <= response.status_code < 300:
            await asyncio.to_thread(self._mark_sent, now)
        return 0

    def _due_event(self, now: datetime) -> TelemetryEvent | None:
        with transaction(self.session_factory, write=False) as session:
            return telemetry_event(session) if heartbeat_due(session, now, TELEMETRY_EVERY) else None

    def _mark_sent(self, now: datetime) -> None:
        with transaction(self.session_factory) as session:
            mark_sent(session, now)

    async def aclose(self) -> None:
        await self.poller.aclose()
