"""The identity domain's background job, registered by app/scheduler.py: the hourly purge of expired
sessions, device sessions, OAuth tokens and authorization codes (see purge.py for what goes and why)."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.orm import Session, sessionmaker

from app.identity.purge import GRACE, purge_expired
from app.kit.jobs import Job, JobSet
from app.kit.time import utcnow

log = logging.getLogger("tidings.identity.jobs")

PURGE_EVERY_SECONDS = 3600.0


class IdentityJobs(JobSet):
    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        self.session_factory = session_factory

    def jobs(self) -> list[Job]:
        return [Job("identity purge", PURGE_EVERY_SECONDS, self.purge)]

    async def purge(self) -> int:
        purged = await asyncio.to_thread(purge_expired, self.session_factory, utcnow() - GRACE)
        if purged.total:
            log.info(
                "purged %d expired sessions, %d device sessions, %d OAuth tokens and %d authorization codes",
                purged.sessions,
                purged.device_sessions,
                purged.oauth_tokens,
                purged.oauth_authorization_codes,
            )
        return 0  # the purge drains its backlog itself: never a reason to run again at once
