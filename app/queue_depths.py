"""The queue gauges of `GET /metrics` (metrics.py), read from the database at scrape time."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.models import Deliverable, DeliverableState, RunState, Source, WatchActionDelivery, WatchActionRun
from app.models.feeds import FAILING_SOURCES
from app.models.watch_runs import PENDING_DELIVERIES, QUEUED_RUNS, RUNNING_RUNS


class QueueDepths(Collector):
    """Rows waiting in the database's work queues, read when scraped."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def collect(self) -> Iterable[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "tidings_queue_depth", "Rows waiting or in flight in a work queue", labels=["queue", "state"]
        )
        session = self.session
        # Both states have partial indexes, so this stays cheap on a million-row table.
        for state in (DeliverableState.QUEUED, DeliverableState.SENDING):
            count = session.scalar(select(func.count()).where(Deliverable.state == state)) or 0
            depth.add_metric(["deliverables", state], count)

        # The partial indexes' own predicates, literally (see app/models/watch_runs.py), so the planner
        # reads only the rows counted; count(*), so an index-only scan does where the index has them.
        # A `failed` run without a completion time waits for its retry.
        queued = {
            state: count
            for state, count in session.execute(
                select(WatchActionRun.state, func.count())
                .where(text(QUEUED_RUNS))
                .group_by(WatchActionRun.state)
            )
        }
        running = (
            session.scalar(select(func.count()).select_from(WatchActionRun).where(text(RUNNING_RUNS))) or 0
        )
        depth.add_metric(["watch_runs", "pending"], queued.get(RunState.PENDING, 0))
        depth.add_metric(["watch_runs", "running"], running)
        depth.add_metric(["watch_runs", "retrying"], queued.get(RunState.FAILED, 0))
        in_flight = select(func.count()).select_from(WatchActionDelivery).where(text(PENDING_DELIVERIES))
        depth.add_metric(["webhook_deliveries", "pending"], session.scalar(in_flight) or 0)
        yield depth

        failing = GaugeMetricFamily(
            "tidings_feed_sources_failing", "Feed sources whose last poll failed (backing off until retry_at)"
        )
        failing_count = select(func.count()).select_from(Source).where(text(FAILING_SOURCES))
        failing.add_metric([], session.scalar(failing_count) or 0)
        yield failing
