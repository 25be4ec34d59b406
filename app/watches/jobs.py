"""The watch domain's background jobs, registered by app/scheduler.py: the run drain (two lanes, so one
claims or records while the other waits on engines and receivers) and the sweep of stale runs."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.kit.jobs import Job, JobSet
from app.kit.newsletters import NewsletterDesk
from app.watches.drain import RunDrain

DRAIN_LANES = 2


class WatchJobs(JobSet):
    def __init__(
        self,
        settings: Settings,
        session_factory: sessionmaker[Session],
        *,
        newsletters: NewsletterDesk | None = None,
    ) -> None:
        self.drain = RunDrain(settings, session_factory, newsletters=newsletters)

    def jobs(self) -> list[Job]:
        sweep_every = max(min(self.drain.lease.total_seconds() / 10, 60.0), 1.0)
        return [
            *[Job(f"run drain lane {n}", 0.5, self.drain.run_once) for n in range(DRAIN_LANES)],
            Job("stale run sweep", sweep_every, self.sweep),
        ]

    async def sweep(self) -> int:
        await self.drain.sweep()
        return 0  # never a reason to run again at once

    async def aclose(self) -> None:
        await self.drain.aclose()
