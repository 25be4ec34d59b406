"""Background work in the serving process or in `tidings worker`: each job is an asyncio task.

The scheduler collects every domain's jobs (a `kit.jobs.JobSet` from each domain's `jobs.py`) and runs
each `Job` as a loop. A job that did work runs again at once (draining a queue); one that found nothing
sleeps for its interval. A job that raises is logged and retried after its interval: the loop never
dies. While the database is unreachable a failing job backs off instead (2, 4, 8 s) and the outage is
one log line every few seconds (`db.note_unreachable`), not a traceback a round.
(A job framework such as APScheduler adds nothing to loops of this shape, so the house uses plain
tasks, as docs/architecture.md says; several processes share the queues through row locks.)

This is also where one domain's jobs are wired to another's, so that neither imports the other: the
feed poller's `on_new_items` hook is the watch run queue's `enqueue_first_runs`, and the watch drain's
desk for campaigns (the `email` action) is the email domain's `MailNewsletters`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import UNREACHABLE, note_unreachable
from app.feeds.jobs import FeedJobs
from app.identity.jobs import IdentityJobs
from app.kit.jobs import Job, JobSet
from app.mail.campaigns.campaign_check import SigningPolicy
from app.mail.events.delivery import EventDelivery
from app.mail.jobs import MailJobs
from app.mail.newsletter_service import MailNewsletters
from app.watches.jobs import WatchJobs
from app.watches.run_queue import enqueue_first_runs

log = logging.getLogger("tidings.scheduler")

# How long a graceful stop waits for the jobs that finish on stop (the send lanes: finish the emails on
# the wire, record them and put back what they had not started): under the 10 s `docker compose stop`
# gives before it kills.
STOP_GRACE_SECONDS = 8.0
# While the database is unreachable a job waits 2, 4, 8 s... between rounds, at most this long (so it
# is back at work within seconds of the database's return).
MAX_OUTAGE_BACKOFF = 8.0


@dataclass(frozen=True, slots=True)
class Drained:
    """What one `tidings worker --once` did."""

    emails: int
    feeds: int
    runs: int
    events: int


@dataclass(frozen=True, slots=True)
class Domains:
    """Every domain's jobs, made once per process (they hold clients, a transport, a worker)."""

    feeds: FeedJobs
    watches: WatchJobs
    identity: IdentityJobs
    # Bounce reports read from an IMAP mailbox, when TIDINGS_BOUNCE_IMAP_URL names one.
    bounces: JobSet | None
    # The account webhooks' events out (app/mail/events/).
    events: EventDelivery
    mail: MailJobs

    def all(self) -> list[JobSet]:
        optional = [self.bounces] if self.bounces is not None else []
        return [self.feeds, self.watches, self.identity, *optional, self.events, self.mail]


class Scheduler:
    def __init__(self, settings: Settings, session_factory: sessionmaker[Session]) -> None:
        self.settings = settings
        self.session_factory = session_factory
        self._domains: Domains | None = None
        self._tasks: list[tuple[Job, asyncio.Task[None]]] = []
        self._stopping = asyncio.Event()

    def domains(self) -> Domains:
        if self._domains is None:
            settings, factory = self.settings, self.session_factory
            bounces = None
            if settings.bounce_imap_url:
                from app.mail.bounces.bounce_imap import BounceMailboxJobs

                bounces = BounceMailboxJobs(settings, factory)
                log.info("bounces are read from the IMAP mailbox %s", bounces.mailbox.describe())
            self._domains = Domains(
                feeds=FeedJobs(settings, factory, on_new_items=enqueue_first_runs),
                watches=WatchJobs(
                    settings, factory, newsletters=MailNewsletters(SigningPolicy.from_settings(settings))
                ),
                identity=IdentityJobs(factory),
                bounces=bounces,
                events=EventDelivery(settings, factory),
                mail=MailJobs(settings, factory),
            )
        return self._domains

    async def drain(self) -> Drained:
        """Do what is due now, then return (`tidings worker --once`): send the due email, poll the due
        feeds, then run the due watch runs, those the poll just enqueued included, then deliver the due
        account webhook events. Runs and events waiting for a retry or a digest window later than now
        stay queued."""
        domains = self.domains()
        emails = await domains.mail.drain()
        feeds = await domains.feeds.poller.drain()
        runs = await domains.watches.drain.drain()
        events = await domains.events.drain()
        return Drained(emails=emails, feeds=feeds, runs=runs, events=events)

    def jobs(self) -> list[Job]:
        return [job for domain in self.domains().all() for job in domain.jobs()]

    async def start(self) -> None:
        self._stopping = asyncio.Event()
        for job in self.jobs():
            self._tasks.append((job, asyncio.create_task(self._loop(job), name=job.name)))

    async def stop(self) -> None:
        """A graceful stop (SIGTERM, the end of `tidings serve`): the jobs that finish on stop (the send
        lanes: they start no more emails, finish and record those on the wire and put the rest of their
        batch back in the queue) end their round; every other job is cancelled where it is (its work is
        leased or transactional)."""
        self._stopping.set()
        domains, self._domains = self._domains, None
        if domains is not None:
            for domain in domains.all():
                domain.stopping()
        finishing = [task for job, task in self._tasks if job.finishes_on_stop]
        if finishing:
            _, late = await asyncio.wait(finishing, timeout=STOP_GRACE_SECONDS)
            if late:
                names = ", ".join(sorted(task.get_name() for task in late))
                log.warning("%s did not finish within %.0f s; stopping them", names, STOP_GRACE_SECONDS)
        for _, task in self._tasks:
            task.cancel()
        await asyncio.gather(*(task for _, task in self._tasks), return_exceptions=True)
        self._tasks.clear()
        if domains is not None:
            for domain in domains.all():
                await domain.aclose()

    async def _sleep(self, job: Job, seconds: float) -> None:
        """Between two rounds of a job: `seconds`, or less when the scheduler stops or the job is woken
        (Job.wake, new work queued)."""
        if job.wake is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), seconds)
            return
        if job.wake.is_set():
            return
        waiters = [asyncio.ensure_future(self._stopping.wait()), asyncio.ensure_future(job.wake.wait())]
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    async def _loop(self, job: Job) -> None:
        failures = 0
        while not self._stopping.is_set():
            if job.wake is not None:
                job.wake.clear()  # this round sees the work queued so far
            try:
                did = await job.run()
            except asyncio.CancelledError:
                raise
            except UNREACHABLE as exc:
                # The database is gone for now: one line now and then for all jobs, and each job waits
                # longer after each failed round (up to MAX_OUTAGE_BACKOFF) instead of hammering it.
                note_unreachable(exc)
                failures += 1
                did = 0
            except Exception:
                log.exception("background job %r failed; retrying in %.1f s", job.name, job.interval)
                did = 0
            else:
                failures = 0
            if not did:
                # Asleep until the next round, or until a stop.
                wait = max(job.interval, min(2.0**failures, MAX_OUTAGE_BACKOFF)) if failures else job.interval
                await self._sleep(job, wait)
            else:
                await asyncio.sleep(0)
