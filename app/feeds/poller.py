"""The feed poller of one worker process: claims due feeds, fetches their sources concurrently (a cap
per process and a smaller one per host), parses off the event loop, and records the results.

Database work is serialised per poller (one short transaction at a time, in a worker thread); polls
that finish while a write is running are written together by the next one (group commit). A poll has a
deadline shorter than its lease, so a feed is never polled by two workers at once: the lease cannot
run out while its poll is still running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import transaction
from app.feeds.connectors import CONNECTORS
from app.feeds.connectors.base import (
    Connector,
    ConnectorError,
    FetchContext,
    HostRateLimits,
    RequestGates,
    SourceJob,
)
from app.feeds.poll_queue import (
    ClaimedFeed,
    FeedPollResult,
    OnNewItems,
    SourceOutcome,
    claim_due_feeds,
    prune_all,
    record_polls,
    release_lease,
)
from app.kit.safe_http import SafeHttp
from app.kit.time import utcnow

log = logging.getLogger("tidings.feeds.poller")

# The part of the lease a poll may use; the rest is the margin for recording it.
LEASE_USE = 0.8


def make_http(settings: Settings) -> SafeHttp:
    return SafeHttp(
        allow_private=settings.outbound_allow_private,
        max_bytes=settings.feed_fetch_max_bytes,
        timeout=settings.feed_fetch_timeout,
        user_agent=f"tidings feed reader (+{settings.base_url})",
        max_connections=max(settings.feed_poll_concurrency, 1),
    )


class FeedPoller:
    def __init__(
        self,
        settings: Settings,
        session_factory: sessionmaker[Session],
        *,
        on_new_items: OnNewItems,
        http: SafeHttp | None = None,
        clock: Callable[[], datetime] = utcnow,
        connectors: dict[str, Connector] | None = None,
    ) -> None:
        self.settings = settings
        self.session_factory = session_factory
        self.on_new_items = on_new_items
        self.http = http or make_http(settings)
        self.clock = clock
        self.connectors = connectors or CONNECTORS
        self.concurrency = max(settings.feed_poll_concurrency, 1)
        self.per_host = max(settings.feed_poll_per_host, 1)
        self.lease = timedelta(seconds=settings.feed_lease_seconds)
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="feed-parse")
        self.rate_limits = HostRateLimits()
        self.in_flight: set[asyncio.Task[None]] = set()
        self._db_lock: asyncio.Lock | None = None
        self._gates: RequestGates | None = None
        self._pending: list[FeedPollResult] = []
        self.polled = 0
        self.items_added = 0

    # --- the event loop's own primitives, made on first use inside it ---

    @property
    def db_lock(self) -> asyncio.Lock:
        if self._db_lock is None:
            self._db_lock = asyncio.Lock()
        return self._db_lock

    @property
    def gates(self) -> RequestGates:
        if self._gates is None:
            self._gates = RequestGates(self.concurrency, self.per_host)
        return self._gates

    async def _db(self, work: Callable[[Session], Any]) -> Any:
        def run() -> Any:
            with transaction(self.session_factory) as session:
                return work(session)

        async with self.db_lock:
            return await asyncio.to_thread(run)

    # --- the scheduler's entry points ---

    async def run_once(self) -> int:
        """Claim as many due feeds as there are free slots and start polling them; returns how many."""
        free = self.concurrency - len(self.in_flight)
        if free <= 0:
            return 0
        now = self.clock()
        claimed: list[ClaimedFeed] = await self._db(
            lambda session: claim_due_feeds(
                session, now, free, self.lease, min_interval_seconds=self.settings.feed_min_poll_seconds
            )
        )
        for claim in claimed:
            task = asyncio.create_task(self.poll(claim), name=f"poll feed {claim.feed_id}")
            self.in_flight.add(task)
            task.add_done_callback(self.in_flight.discard)
        return len(claimed)

    async def drain(self) -> int:
        """Poll every feed that is due now, and wait for them (tests, `--once`, the benchmark)."""
        polled_before = self.polled
        while True:
            started = await self.run_once()
            if not started and not self.in_flight:
                break
            if self.in_flight:
                await asyncio.wait(set(self.in_flight), return_when=asyncio.FIRST_COMPLETED)
        return self.polled - polled_before

    async def prune(self) -> int:
        now = self.clock()
        pruned: int = await self._db(lambda session: prune_all(session, now))
        return pruned

    async def aclose(self) -> None:
        for task in list(self.in_flight):
            task.cancel()
        await asyncio.gather(*self.in_flight, return_exceptions=True)
        await self.http.aclose()
        self.executor.shutdown(wait=False, cancel_futures=True)

    # --- one feed ---

    async def poll(self, claim: ClaimedFeed) -> None:
        result = FeedPollResult(claim)
        budget = self.lease.total_seconds() * LEASE_USE
        tasks = [asyncio.create_task(self.poll_source(job)) for job in claim.jobs]
        try:
            if tasks:
                done, pending = await asyncio.wait(tasks, timeout=budget)
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.gather(*pending, return_exceptions=True)
                    log.warning(
                        "feed %s: %d sources not done within %.0f s; they wait for the next poll",
                        claim.feed_id,
                        len(pending),
                        budget,
                    )
                result.outcomes = [task.result() for task in tasks if task in done]
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.shield(self._release(claim))
            raise
        await self._record(result)

    async def poll_source(self, job: SourceJob) -> SourceOutcome:
        connector = self.connectors.get(job.kind)
        if connector is None:
            return SourceOutcome(job, error=ConnectorError(f"no connector for source kind {job.kind!r}"))
        context = FetchContext(
            http=self.http,
            settings=self.settings,
            run_cpu=self._run_cpu,
            gates=self.gates,
            rate_limits=self.rate_limits,
        )
        try:
            fetched = await connector.fetch(job, context)
        except ConnectorError as exc:
            return SourceOutcome(job, error=exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a connector's bug must not stop the feed, let alone the poller
            log.exception("source %s (%s): connector failed", job.source_id, job.kind)
            return SourceOutcome(
                job, error=ConnectorError(f"internal error: {type(exc).__name__}: {exc}"[:500])
            )
        return SourceOutcome(job, fetched=fetched)

    async def _run_cpu(self, function: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, function, *args)

    async def _release(self, claim: ClaimedFeed) -> None:
        now = self.clock()
        try:
            await self._db(lambda session: release_lease(session, claim, now))
        except Exception:
            log.exception("feed %s: could not release its lease", claim.feed_id)

    async def _record(self, result: FeedPollResult) -> None:
        self._pending.append(result)
        async with self.db_lock:
            batch, self._pending = self._pending, []
            if not batch:
                return  # written by the poll that held the lock before
            now = self.clock()
            try:
                added = await asyncio.to_thread(self._record_batch, batch, now)
            except Exception:
                log.exception("recording %d polls together failed; recording them one by one", len(batch))
                added = 0
                for one in batch:
                    try:
                        added += await asyncio.to_thread(self._record_batch, [one], now)
                    except Exception:
                        log.exception("feed %s: could not record its poll", one.claim.feed_id)
        self.items_added += added
        self.polled += len(batch)

    def _record_batch(self, batch: list[FeedPollResult], now: datetime) -> int:
        with transaction(self.session_factory) as session:
            added = record_polls(session, batch, now, on_new_items=self.on_new_items)
            for result in batch:
                errors = [o for o in result.outcomes if o.error is not None]
                if errors:
                    log.info(
                        "feed %s: %d of %d sources failed; first: %s",
                        result.claim.feed_id,
                        len(errors),
                        len(result.outcomes),
                        errors[0].error,
                    )
            return added
