"""Prometheus metrics: `GET /metrics`, the request counter middleware, and the queue gauges.

Counters live in each process (prometheus-client's default registry): scrape every API process, and
start `tidings worker --metrics-port P` to scrape a worker. Queue depths are read from the database at
scrape time, so any process reports the same, whole-system figures.

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
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.models import Deliverable

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
        # Both states have partial indexes, so this stays cheap on a million-row table.
        for state in ("queued", "sending"):
            count = self.session.scalar(select(func.count()).where(Deliverable.state == state)) or 0
            depth.add_metric(["deliverables", state], count)
        yield depth


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
