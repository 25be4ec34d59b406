"""The background job that sends the outbox: claim a batch, sign each event (Standard Webhooks:
`webhook-id`, `webhook-timestamp`, `webhook-signature`, HMAC-SHA256 by the `standardwebhooks`
library), send them all at once through the SSRF-safe client, record the attempts. Two lanes, so one
claims or records while the other waits on receivers; while the outbox is empty only the first polls it
(`kit.jobs.Lanes`)."""

from __future__ import annotations

import asyncio
import functools
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker
from standardwebhooks import Webhook

from app import db
from app.config import Settings
from app.kit.jobs import Job, JobSet, Lanes
from app.kit.safe_http import SafeHttp
from app.kit.time import utcnow
from app.kit.webhook_call import call_webhook
from app.mail.events.campaign_finish import finish_campaigns
from app.mail.events.queue import Attempted, ClaimedEvent, claim_events, record_attempts, take_back_stale

DELIVERY_LANES = 2
# How often the first lane looks at an empty outbox: an event waits at most this long for its first call.
DELIVERY_POLL_SECONDS = 0.5


@functools.lru_cache(maxsize=256)
def signer(secret: str) -> Webhook:
    """A webhook's signer, kept across calls (it decodes the secret once); bounded, since secrets are
    rotated and a long-running worker would otherwise keep every one it ever saw."""
    return Webhook(secret)


def message_id(event_id: int) -> str:
    """The `webhook-id` header: the same at every attempt, so a receiver can drop a repeat."""
    return f"msg_{event_id}"


class EventDelivery(JobSet):
    def __init__(self, settings: Settings, session_factory: sessionmaker[Session]) -> None:
        self.settings = settings
        self.session_factory = session_factory
        self.batch = max(1, settings.event_batch_size)
        # Past the longest call a receiver may take, a claimed event is a dead worker's.
        self.lease = timedelta(seconds=settings.webhook_timeout + 30)
        self.http = SafeHttp(
            allow_private=settings.outbound_allow_private,
            max_bytes=settings.webhook_max_response_bytes,
            timeout=settings.webhook_timeout,
            user_agent=f"tidings events (+{settings.base_url})",
            max_connections=max(1, settings.event_concurrency),
        )
        self._slots: asyncio.Semaphore | None = None

    @property
    def slots(self) -> asyncio.Semaphore:
        """Calls in flight in this process, at most the client's connections: a batch queued deeper in
        the connection pool makes it walk the whole queue of requests at every handout."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, self.settings.event_concurrency))
        return self._slots

    def jobs(self) -> list[Job]:
        return [
            *Lanes("event delivery lane", DELIVERY_LANES, DELIVERY_POLL_SECONDS, self.run_once).jobs(),
            Job("campaign finish", 2.0, self.finish),
            Job("stale event sweep", 15.0, self.sweep),
        ]

    async def run_once(self) -> int:
        """Send one batch of due events; how many were attempted."""
        claimed = await asyncio.to_thread(self._claim)
        if not claimed:
            return 0
        attempted = await asyncio.gather(*(self._send(event) for event in claimed))
        await asyncio.to_thread(self._record, attempted)
        return len(claimed)

    async def drain(self) -> int:
        """Everything due now, then return (`tidings worker --once` and the tests)."""
        await self.finish()
        total = 0
        while done := await self.run_once():
            total += done
        return total

    async def finish(self) -> int:
        return await asyncio.to_thread(self._finish)

    async def sweep(self) -> int:
        await asyncio.to_thread(self._sweep)
        return 0  # never a reason to run again at once

    async def aclose(self) -> None:
        await self.http.aclose()

    def _claim(self) -> list[ClaimedEvent]:
        with db.transaction(self.session_factory) as session:
            return claim_events(session, utcnow(), self.batch, self.lease)

    def _record(self, attempted: list[Attempted]) -> None:
        with db.transaction(self.session_factory) as session:
            record_attempts(session, attempted, utcnow())

    def _finish(self) -> int:
        with db.transaction(self.session_factory) as session:
            return finish_campaigns(session, utcnow())

    def _sweep(self) -> None:
        with db.transaction(self.session_factory) as session:
            take_back_stale(session, utcnow())

    async def _send(self, event: ClaimedEvent) -> Attempted:
        async with self.slots:
            return await self._call(event)

    async def _call(self, event: ClaimedEvent) -> Attempted:
        started = utcnow()
        msg_id = message_id(event.id)
        headers = {
            "Content-Type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(started.timestamp())),
            # Standard Webhooks: several signatures, space-separated; a receiver accepts any it can verify.
            "webhook-signature": " ".join(
                signer(secret).sign(msg_id, started, event.body) for secret in event.secrets
            ),
        }
        result = await call_webhook(
            self.http,
            "POST",
            event.url,
            headers=headers,
            content=event.body.encode(),
            timeout=self.settings.webhook_timeout,
            max_response_bytes=self.settings.webhook_max_response_bytes,
        )
        return Attempted(event, result, started, utcnow())
