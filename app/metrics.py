"""Prometheus metrics: `GET /metrics`, the request counter middleware, and the queue gauges.

Counters live in each process (prometheus-client's default registry): scrape every API process, and
start `tidings worker --metrics-port P` to scrape a worker. `tidings_emails_total{result}` counts the
emails a process's send workers attempted (sent, retry, failed, bounced), so the send rate is
`sum(rate(tidings_emails_total{result="sent"}[5m]))` over the processes that send (workers, and a
serving process with its scheduler on).

Gauges are read from the database at scrape time, so any process reports the same, whole-system
figures: `tidings_queue_depth{queue,state}` for the work queues (campaign deliverables queued and
sending; watch runs pending, running and retrying, i.e. failed with an attempt left; webhook deliveries
pending, i.e. calls in flight) and `tidings_feed_sources_failing`, the feed sources whose last poll
failed (they are backing off). Each is answered from a partial index holding only the rows it counts.

Set `TIDINGS_METRICS_TOKEN` to require `Authorization: Bearer <token>` on /metrics (open otherwise, as
Prometheus' own endpoints are; put it behind your network's access rules).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Iterable

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.models import Deliverable, Source, WatchActionDelivery, WatchActionRun
from app.models.feeds import FAILING_SOURCES
from app.models.watch_runs import PENDING_DELIVERIES, QUEUED_RUNS, RUNNING_RUNS

REQUESTS = Counter(
    "tidings_http_requests_total",
    "HTTP requests answered, by route template and status",
    ["method", "route", "status"],
)
LATENCY = Histogram(
    "tidings_http_request_seconds",
    "Time to answer an HTTP request, by route template",
    ["route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)

metrics_router = APIRouter(include_in_schema=False)


class RequestMetrics:
    """Counts every response by its route template (`/contacts/{id}`, never the raw path: bounded labels)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "(unmatched)"
            REQUESTS.labels(scope["method"], template, str(status)).inc()
            LATENCY.labels(template).observe(time.perf_counter() - started)


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
        for state in ("queued", "sending"):
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
        depth.add_metric(["watch_runs", "pending"], queued.get("pending", 0))
        depth.add_metric(["watch_runs", "running"], running)
        depth.add_metric(["watch_runs", "retrying"], queued.get("failed", 0))
        in_flight = select(func.count()).select_from(WatchActionDelivery).where(text(PENDING_DELIVERIES))
        depth.add_metric(["webhook_deliveries", "pending"], session.scalar(in_flight) or 0)
        yield depth

        failing = GaugeMetricFamily(
            "tidings_feed_sources_failing", "Feed sources whose last poll failed (backing off until retry_at)"
        )
        failing_count = select(func.count()).select_from(Source).where(text(FAILING_SOURCES))
        failing.add_metric([], session.scalar(failing_count) or 0)
        yield failing


@metrics_router.get("/metrics")
def metrics(request: Request) -> Response:
    token = request.app.state.settings.metrics_token
    if token:
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return Response("unauthorized\n", status_code=401, media_type="text/plain")
    with request.app.state.read_session_factory() as session:
        scraped = CollectorRegistry(auto_describe=False)
        scraped.register(QueueDepths(session))
        body = generate_latest(REGISTRY) + generate_latest(scraped)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
