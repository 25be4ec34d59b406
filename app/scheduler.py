"""Background work in the serving process or in `tidings worker`: each job is an asyncio task.

Every domain's jobs register here. A job that did work runs again at once (draining a queue); one
that found nothing sleeps for its interval. A job that raises is logged and retried after its
interval: the loop never dies. (A job framework such as APScheduler adds nothing to loops of this
shape, so the house uses plain tasks, as docs/architecture.md says; several processes share the queues
through row locks.)

This is also where one domain's jobs are wired to another's, so that neither imports the other: the
feed poller's `on_new_items` hook is the watch run queue's `enqueue_first_runs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.feeds.jobs import FeedJobs
from app.identity.jobs import IdentityJobs
from app.mail.events.delivery import EventDelivery
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import Transport, describe_transport, make_transport
from app.mail.sending.worker import SendConfig, SendWorker
from app.watches.jobs import WatchJobs
from app.watches.run_queue import enqueue_first_runs

log = logging.getLogger("tidings.scheduler")

# The lease sweep runs this often, or twice a lease when leases are shorter.
LEASE_SWEEP_SECONDS = 15.0
# How long a graceful stop waits for the send lanes to finish the emails on the wire, record them and put
# back what they had not started: under the 10 s `docker compose stop` gives before it kills.
STOP_GRACE_SECONDS = 8.0


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    interval: float
    # Returns how much it did; 0 means "nothing to do, sleep".
    run: Callable[[], Awaitable[int]]
    # A stop lets the round in progress finish (within STOP_GRACE_SECONDS) instead of cancelling it.
    finishes_on_stop: bool = False


@dataclass(frozen=True, slots=True)
class Drained:
    """What one `tidings worker --once` did."""

    emails: int
    feeds: int
    runs: int
    events: int


class Scheduler:
    def __init__(self, settings: Settings, session_factory: sessionmaker[Session]) -> None:
        self.settings = settings
        self.session_factory = session_factory
        self.transport: Transport | None = None
        self.feed_jobs: FeedJobs | None = None
        self.watch_jobs: WatchJobs | None = None
        self.event_delivery: EventDelivery | None = None
        self.sender: SendWorker | None = None
        self._tasks: list[tuple[Job, asyncio.Task[None]]] = []
        self._stopping = asyncio.Event()

    def send_worker(self) -> SendWorker:
        settings = self.settings
        if self.transport is None:
            self.transport = make_transport(
                settings.smtp_url, settings.outbox_path, settings.send_concurrency
            )
            log.info("email goes to %s", describe_transport(self.transport))
        return SendWorker(
            SendConfig.from_settings(settings),
            self.session_factory,
            self.transport,
            MailTokens(settings.resolved_secret_key),
        )

    def _feed_jobs(self) -> FeedJobs:
        if self.feed_jobs is None:
            self.feed_jobs = FeedJobs(self.settings, self.session_factory, on_new_items=enqueue_first_runs)
        return self.feed_jobs

    def _watch_jobs(self) -> WatchJobs:
        if self.watch_jobs is None:
            self.watch_jobs = WatchJobs(self.settings, self.session_factory)
        return self.watch_jobs

    def _event_delivery(self) -> EventDelivery:
        if self.event_delivery is None:
            self.event_delivery = EventDelivery(self.settings, self.session_factory)
        return self.event_delivery

    async def drain(self) -> Drained:
        """Do what is due now, then return (`tidings worker --once`): send the due email, poll the due
        feeds, then run the due watch runs, those the poll just enqueued included, then deliver the due
        account webhook events. Runs and events waiting for a retry or a digest window later than now
        stay queued."""
        emails = await self.send_worker().drain()
        feeds = await self._feed_jobs().poller.drain()
        runs = await self._watch_jobs().drain.drain()
        events = await self._event_delivery().drain()
        return Drained(emails=emails, feeds=feeds, runs=runs, events=events)

    def jobs(self) -> list[Job]:
        worker = self.sender = self.send_worker()

        async def fan_out() -> int:
            return len(await asyncio.to_thread(worker.fan_out))

        async def release_leases() -> int:
            await asyncio.to_thread(worker.release_leases)
            return 0  # never a reason to run again at once

        feed_jobs = [Job(name, interval, run) for name, interval, run in self._feed_jobs().jobs()]
        identity_jobs = [
            Job(name, interval, run) for name, interval, run in IdentityJobs(self.session_factory).jobs()
        ]
        watch_jobs = [Job(name, interval, run) for name, interval, run in self._watch_jobs().jobs()]
        bounce_jobs = []
        if self.settings.bounce_imap_url:
            from app.mail.bounce_imap import BounceMailboxJobs

            mailbox = BounceMailboxJobs(self.settings, self.session_factory)
            log.info("bounces are read from the IMAP mailbox %s", mailbox.mailbox.describe())
            bounce_jobs = [Job(name, interval, run) for name, interval, run in mailbox.jobs()]
        event_jobs = [Job(name, interval, run) for name, interval, run in self._event_delivery().jobs()]

        sweep = min(LEASE_SWEEP_SECONDS, max(1.0, self.settings.send_lease_seconds / 2))
        return [
            *feed_jobs,
            *watch_jobs,
            *identity_jobs,
            *bounce_jobs,
            *event_jobs,
            Job("campaign fan-out", 1.0, fan_out),
            Job("send lease sweep", sweep, release_leases),
            *[
                Job(f"send lane {n}", 0.5, worker.run_once, finishes_on_stop=True)
                for n in range(max(1, self.settings.send_lanes))
            ],
        ]

    async def start(self) -> None:
        self._stopping = asyncio.Event()
        for job in self.jobs():
            self._tasks.append((job, asyncio.create_task(self._loop(job), name=job.name)))

    async def stop(self) -> None:
        """A graceful stop (SIGTERM, the end of `tidings serve`): the send lanes start no more emails,
        finish and record those on the wire and put the rest of their batch back in the queue; every
        other job is cancelled where it is (its work is leased or transactional)."""
        self._stopping.set()
        if self.sender is not None:
            self.sender.stopping = True
        finishing = [task for job, task in self._tasks if job.finishes_on_stop]
        if finishing:
            _, late = await asyncio.wait(finishing, timeout=STOP_GRACE_SECONDS)
            if late:
                log.warning(
                    "%d send lanes did not finish within %.0f s; stopping them", len(late), STOP_GRACE_SECONDS
                )
        for _, task in self._tasks:
            task.cancel()
        await asyncio.gather(*(task for _, task in self._tasks), return_exceptions=True)
        self._tasks.clear()
        if self.transport is not None:
            await self.transport.close()
        if self.feed_jobs is not None:
            await self.feed_jobs.aclose()
            self.feed_jobs = None
        if self.watch_jobs is not None:
            await self.watch_jobs.aclose()
            self.watch_jobs = None
        if self.event_delivery is not None:
            await self.event_delivery.aclose()
            self.event_delivery = None

    async def _loop(self, job: Job) -> None:
        while not self._stopping.is_set():
            try:
                did = await job.run()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("background job %r failed; retrying in %.1f s", job.name, job.interval)
                did = 0
            if not did:
                # Asleep until the next round, or until a stop.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), job.interval)
            else:
                await asyncio.sleep(0)
