"""The run drain of one worker process: claims due runs, performs their actions concurrently outside any
transaction, and records the outcomes together.

One pass is a few short transactions: the claim; the `pending` rows of the webhook deliveries about to
be made; the outcomes (runs, deliveries, and the next action's runs of the chains that go on), written
each second for what finished in it, so a slow receiver does not hold the rest of the batch back. The
slow part (engines, receivers, linked articles) runs between them, with at most
`watch_drain_concurrency` actions at once in the process. A digest window's runs are performed
together: one log line or one webhook request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import transaction
from app.kit.newsletters import Newsletter, NewsletterDesk, Published
from app.kit.safe_http import SafeHttp
from app.kit.time import utcnow
from app.models import DeliveryState, RunState
from app.watches.actions import ACTIONS
from app.watches.actions.base import Action, ActionContext, Performed, Prepared, Unreadable
from app.watches.engines.registry import Engines
from app.watches.run_queue import (
    ClaimedRun,
    DeliveryOutcome,
    Outcome,
    claim_runs,
    gathers_runs,
    open_deliveries,
    record_outcomes,
    take_back_stale,
)
from app.watches.secrets import scrub_secrets

logger = logging.getLogger("tidings.watches.drain")

# While a batch is being performed, what has finished is recorded this often (seconds).
RECORD_EVERY = 1.0


def make_context(settings: Settings, engines: Engines | None = None) -> ActionContext:
    concurrency = max(settings.watch_drain_concurrency, 1)
    return ActionContext(
        settings=settings,
        engines=engines or Engines(settings),
        webhook_http=SafeHttp(
            allow_private=settings.outbound_allow_private,
            max_bytes=settings.webhook_max_response_bytes,
            timeout=settings.webhook_timeout,
            user_agent=f"tidings webhooks (+{settings.base_url})",
            max_connections=concurrency,
        ),
        enrich_http=SafeHttp(
            allow_private=settings.outbound_allow_private,
            max_bytes=settings.enrichment_max_bytes,
            timeout=settings.enrichment_timeout,
            user_agent=f"tidings article reader (+{settings.base_url})",
            max_connections=concurrency,
        ),
    )


def _group(runs: list[ClaimedRun]) -> list[list[ClaimedRun]]:
    """One group per instant run; one per digest window (action and window end); one per action for
    the runs of an action with a spacing (`email`'s min_interval_seconds), claimed together to go out
    together."""
    groups: dict[Any, list[ClaimedRun]] = {}
    for run in runs:
        if run.window is not None:
            key: Any = (run.action_id, run.window[1])
        elif gathers_runs(run.config):
            key = run.action_id
        else:
            key = run.run_id
        groups.setdefault(key, []).append(run)
    return list(groups.values())


class RunDrain:
    def __init__(
        self,
        settings: Settings,
        session_factory: sessionmaker[Session],
        *,
        context: ActionContext | None = None,
        newsletters: NewsletterDesk | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.settings = settings
        self.session_factory = session_factory
        self.context = context or make_context(settings)
        self.newsletters = newsletters
        if newsletters is not None:
            self.context = replace(self.context, publish=self._publish)
        self.clock = clock
        self.batch = max(settings.watch_drain_batch, 1)
        self.digest_cap = max(settings.digest_max_items, 1)
        self.lease = timedelta(seconds=settings.watch_run_lease_seconds)
        self._slots: asyncio.Semaphore | None = None
        self._publishing: asyncio.Lock | None = None
        self.recorded = 0
        self.deliveries = 0

    @property
    def slots(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(self.settings.watch_drain_concurrency, 1))
        return self._slots

    async def _db(self, work: Callable[[Session], Any]) -> Any:
        def run() -> Any:
            with transaction(self.session_factory) as session:
                return work(session)

        return await asyncio.to_thread(run)

    # --- the scheduler's entry points ---

    async def run_once(self) -> int:
        """One pass: claim, perform, record. Returns how many runs it moved (0: nothing was due)."""
        now = self.clock()
        claim = await self._db(lambda session: claim_runs(session, now, self.batch, self.digest_cap))
        if not claim.runs:
            return len(claim)
        outcomes: list[Outcome] = []
        deliveries: list[DeliveryOutcome] = []
        ready: list[tuple[Action, Prepared]] = []
        for group in _group(claim.runs):
            action = ACTIONS.get(group[0].kind)
            if action is None:
                error = f"unknown action kind {group[0].kind!r}"
                outcomes.extend(Outcome(run, RunState.ERRORED, error=error) for run in group)
                continue
            prepared = action.prepare(group, now)
            outcomes.extend(prepared.errored)
            if prepared.runs:
                ready.append((action, prepared))
        # The deliveries about to be made, `pending` before their calls, in one transaction.
        rows = [prepared.row for _, prepared in ready if prepared.row is not None]
        if rows:
            await self._db(lambda session: open_deliveries(session, rows))
        work = [self._perform(action, prepared) for action, prepared in ready]
        tasks = {asyncio.ensure_future(job) for job in work}
        while True:
            # What finished is recorded within a second or so, even while a slow receiver or engine
            # holds the rest of the batch.
            finished, tasks = await asyncio.wait(tasks, timeout=RECORD_EVERY) if tasks else (set(), set())
            for task in finished:
                found, delivery = task.result()
                outcomes.extend(found)
                if delivery is not None:
                    deliveries.append(delivery)
            if outcomes or deliveries:
                await self._record(outcomes, deliveries)
                outcomes, deliveries = [], []
            if not tasks:
                return len(claim)

    async def _publish(self, newsletter: Newsletter) -> Published:
        """An `email` action's campaign, made in a transaction of its own before its runs are recorded
        (a retry of the same runs finds it by its key)."""
        desk = self.newsletters
        if desk is None:
            raise RuntimeError("no email API desk wired in")
        if self._publishing is None:
            self._publishing = asyncio.Lock()
        # One at a time in a process: each is a short write of a few rows (SQLite queues writers
        # anyway), and the groups of one claim then never contend for the same lists' rows.
        async with self._publishing:
            published: Published = await self._db(lambda session: desk.publish(session, newsletter))
        return published

    async def _record(self, outcomes: list[Outcome], deliveries: list[DeliveryOutcome]) -> None:
        done = self.clock()
        recorded = await self._db(lambda session: record_outcomes(session, outcomes, deliveries, done))
        self.recorded += recorded
        self.deliveries += len(deliveries)

    async def drain(self) -> int:
        """Passes until nothing is due (tests, `--once`); returns how many runs were moved."""
        total = 0
        while True:
            moved = await self.run_once()
            if not moved:
                return total
            total += moved

    async def sweep(self) -> int:
        now = self.clock()
        taken: int = await self._db(lambda session: take_back_stale(session, now, self.lease))
        if taken:
            logger.warning("took back %d runs left running for more than %s", taken, self.lease)
        return taken

    async def aclose(self) -> None:
        await self.context.webhook_http.aclose()
        await self.context.enrich_http.aclose()
        await self.context.engines.aclose()

    # --- performing ---

    async def _perform(self, action: Action, prepared: Prepared) -> Performed:
        first, row = prepared.runs[0], prepared.row
        async with self.slots:
            try:
                return await action.perform(self.context, prepared, self.clock)
            except Unreadable as exc:
                return [Outcome(run, RunState.ERRORED, error=str(exc)) for run in prepared.runs], None
            except Exception as exc:  # a defect, not a transient failure: retrying would not help
                logger.exception("action %s (%s) failed on run %s", first.action_id, first.kind, first.run_id)
                error = f"internal error: {type(exc).__name__}: {exc}"
                # Shown by the API: a webhook's URL and headers hidden, as in every response.
                error = scrub_secrets(error, first.config)[:1000]
                delivery_id = row["id"] if row is not None else None
                outcomes = [
                    Outcome(run, RunState.ERRORED, error=error, delivery_id=delivery_id)
                    for run in prepared.runs
                ]
                if delivery_id is None:
                    return outcomes, None
                done = self.clock()
                return outcomes, DeliveryOutcome(delivery_id, DeliveryState.ERRORED, None, error, done)
