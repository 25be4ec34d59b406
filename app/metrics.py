"""Prometheus metrics: `GET /metrics`, the request counter middleware, and the queue gauges (their
queries are in queue_depths.py).

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

The public port answers /metrics only to clients in `TIDINGS_METRICS_ALLOWED_NETWORKS` (loopback and
the private ranges by default: 403 elsewhere), or to any client with `Authorization: Bearer <token>` when
`TIDINGS_METRICS_TOKEN` is set, which is then required from every network (401 without it). A worker's
`--metrics-port` serves the counters on a port of its own, which the operator chooses to expose or not.
"""

from __future__ import annotations

import hmac
import time
from functools import lru_cache
from ipaddress import IPv4Network, IPv6Address, IPv6Network, ip_address

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest
from prometheus_client.registry import CollectorRegistry
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.app_state import SettingsDep
from app.config import Settings, parse_networks
from app.queue_depths import QueueDepths
from app.request_sessions import SessionDep

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


@lru_cache(maxsize=8)
def _networks(setting: str) -> tuple[IPv4Network | IPv6Network, ...]:
    return parse_networks(setting)


def in_networks(host: str, setting: str) -> bool:
    """Whether a client address lies in one of the networks; a host that is no address never does."""
    try:
        address = ip_address(host)
    except ValueError:
        return False
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:10.0.0.5 on a dual-stack socket is 10.0.0.5
    return any(address in network for network in _networks(setting))


def scrape_refusal(request: Request, settings: Settings) -> Response | None:
    """401 without the configured token, else 403 outside the allowed networks, else None."""
    if settings.metrics_token:
        given = request.headers.get("authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {settings.metrics_token}".encode()):
            return None
        return Response("unauthorized\n", status_code=401, media_type="text/plain")
    host = request.client.host if request.client else ""
    if in_networks(host, settings.metrics_allowed_networks):
        return None
    return Response(
        "forbidden: this address is not in TIDINGS_METRICS_ALLOWED_NETWORKS\n",
        status_code=403,
        media_type="text/plain",
    )


@metrics_router.get("/metrics")
def metrics(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    refusal = scrape_refusal(request, settings)
    if refusal is not None:
        return refusal
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(QueueDepths(session))
    body = generate_latest(REGISTRY) + generate_latest(scraped)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
