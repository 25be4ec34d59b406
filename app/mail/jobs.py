"""The email domain's background jobs, registered by app/scheduler.py: the campaign fan-out, the sweep of
expired send leases (which also cancels the emails of cancelled campaigns that came back to the queue),
and the send lanes (each claims a batch, sends it and records it; a graceful stop
lets a lane finish and record the emails on the wire and put back the rest of its batch)."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.kit.jobs import Job, JobSet, Lanes
from app.mail.sending.dkim import DkimSigner
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import describe_transport, make_transport
from app.mail.sending.worker import SendConfig, SendWorker

log = logging.getLogger("tidings.mail.jobs")

# The lease sweep runs this often, or twice a lease when leases are shorter.
LEASE_SWEEP_SECONDS = 15.0
FAN_OUT_SECONDS = 1.0
SEND_LANE_SECONDS = 0.5


class MailJobs(JobSet):
    """The jobs and what they share: one transport (an SMTP connection pool, or the outbox) and one send
    worker per process."""

    def __init__(self, settings: Settings, session_factory: sessionmaker[Session]) -> None:
        self.settings = settings
        self.transport = make_transport(
            settings.smtp_url,
            settings.outbox_path,
            settings.send_concurrency,
            settings.ehlo_name,
            settings.smtp_throttle_window,
        )
        log.info("email goes to %s", describe_transport(self.transport))
        self.worker = SendWorker(
            SendConfig.from_settings(settings),
            session_factory,
            self.transport,
            MailTokens(settings.resolved_secret_key),
            dkim=DkimSigner(settings.resolved_secret_key, settings.dkim_unsigned_headers.split(",")),
        )
        self.lanes: Lanes | None = None  # made with the jobs

    def jobs(self) -> list[Job]:
        sweep = min(LEASE_SWEEP_SECONDS, max(1.0, self.settings.send_lease_seconds / 2))
        # While the queue is empty only the first lane claims (see kit.jobs.Lanes).
        self.lanes = Lanes("send lane", self.settings.send_lanes, SEND_LANE_SECONDS, self.worker.run_once)
        return [
            Job("campaign fan-out", FAN_OUT_SECONDS, self.fan_out),
            Job("send lease sweep", sweep, self.release_leases),
            *self.lanes.jobs(finishes_on_stop=True),
        ]

    async def fan_out(self) -> int:
        fanned_out = len(await asyncio.to_thread(self.worker.fan_out))
        if fanned_out and self.lanes is not None:
            self.lanes.nudge()  # the campaign's first emails go now, not at the lanes' next poll
        return fanned_out

    async def release_leases(self) -> int:
        await asyncio.to_thread(self.worker.release_leases)
        await asyncio.to_thread(self.worker.cancel_returned)
        return 0  # never a reason to run again at once

    async def drain(self) -> int:
        """Fan out and send what is due now (`tidings worker --once`); returns how many emails."""
        return await self.worker.drain()

    def stopping(self) -> None:
        self.worker.stopping = True
        if self.lanes is not None:
            self.lanes.wake()  # the sleeping lanes' round returns at once: the worker is stopping

    async def aclose(self) -> None:
        await self.transport.close()
        self.worker.close()
