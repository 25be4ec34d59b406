"""GET /metrics (request counters by route template, queue depths, failing feed sources), request ids,
JSON log lines."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.config import Settings
from app.kit.ids import new_ulid
from app.kit.time import utcnow
from app.logs import REQUEST_ID, JsonFormatter
from app.main import create_app
from app.models import Feed, Source, Watch, WatchAction, WatchActionDelivery, WatchActionRun
from tests.conftest import ApiUser
from tests.processes import served_app


@pytest.fixture
def client(app: Any) -> Any:
    """Scrapes come from loopback, as from a Prometheus beside the service (allowed by default)."""
    with TestClient(app, raise_server_exceptions=False, client=("127.0.0.1", 50000)) as test_client:
        yield test_client


def scrape(settings: Settings, session_factory: Any, host: str, **headers: str) -> httpx.Response:
    app = create_app(settings=settings, session_factory=session_factory)
    with TestClient(app, raise_server_exceptions=False, client=(host, 50000)) as from_host:
        return from_host.get("/metrics", headers=headers)


def sample(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
    prefix = f"{name}{{{wanted}}} " if labels else f"{name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_requests_are_counted_by_route_template(client: TestClient, api_user: Any) -> None:
    before = client.get("/metrics").text
    client.get("/me", headers=api_user.headers)
    client.get("/contacts/999999", headers=api_user.headers)
    client.get("/nowhere")
    after = client.get("/metrics")
    assert after.status_code == 200
    assert after.headers["content-type"].startswith("text/plain")
    text = after.text
    for labels in (
        {"method": "GET", "route": "/me", "status": "200"},
        {"method": "GET", "route": "/contacts/{id}", "status": "404"},
        {"method": "GET", "route": "(unmatched)", "status": "404"},
    ):
        name = "tidings_http_requests_total"
        assert sample(text, name, **labels) == sample(before, name, **labels) + 1, labels
    assert 'tidings_queue_depth{queue="deliverables",state="queued"}' in text
    assert "/contacts/999999" not in text  # raw paths never become labels


GAUGES: list[tuple[str, dict[str, str]]] = [
    ("tidings_queue_depth", {"queue": "watch_runs", "state": "pending"}),
    ("tidings_queue_depth", {"queue": "watch_runs", "state": "running"}),
    ("tidings_queue_depth", {"queue": "watch_runs", "state": "retrying"}),
    ("tidings_queue_depth", {"queue": "webhook_deliveries", "state": "pending"}),
    ("tidings_feed_sources_failing", {}),
]


def gauges(client: TestClient) -> list[float]:
    text = client.get("/metrics").text
    for name, labels in GAUGES:
        # Present even at zero: an absent series reads as "no data" in Prometheus, not as an empty queue.
        assert (f"{name}{{" if labels else f"{name} ") in text, name
    return [sample(text, name, **labels) for name, labels in GAUGES]


def test_watch_queues_and_failing_sources_are_gauged(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    before = gauges(client)
    now = utcnow()
    account = api_user.account_id
    feed = Feed(id=new_ulid(), account_id=account, name="Gauged")
    watch = Watch(id=new_ulid(), account_id=account, name="Gauged")
    db.add_all([feed, watch])
    db.flush()
    action = WatchAction(
        id=new_ulid(), account_id=account, watch_id=watch.id, kind="webhook", rank=0, config={}
    )
    db.add(action)
    db.flush()

    def run(state: str, *, completed: bool = False) -> WatchActionRun:
        return WatchActionRun(
            id=new_ulid(),
            account_id=account,
            watch_id=watch.id,
            action_id=action.id,
            feed_item_id=new_ulid(),
            feed_id=feed.id,
            kind="webhook",
            state=state,
            created_at=now,
            scheduled_at=now,
            started_at=now if state != "pending" else None,
            completed_at=now if completed else None,
        )

    def delivery(state: str) -> WatchActionDelivery:
        return WatchActionDelivery(
            id=new_ulid(),
            account_id=account,
            watch_id=watch.id,
            action_id=action.id,
            delivery="instant",
            method="POST",
            state=state,
            created_at=now,
            started_at=now,
            completed_at=None if state == "pending" else now,
        )

    def source(n: int, failures: int) -> Source:
        return Source(
            id=new_ulid(),
            account_id=account,
            feed_id=feed.id,
            kind="rss",
            spec={"kind": "rss", "url": f"https://example.com/{n}.xml"},
            spec_hash=f"{n:064d}",
            display=f"Source {n}",
            start_at=now,
            consecutive_failures=failures,
            retry_at=now + timedelta(minutes=10) if failures else None,
        )

    db.add_all(
        [
            *(run("pending") for _ in range(3)),
            *(run("running") for _ in range(2)),
            # A failed run with an attempt left waits for its retry; one whose attempts are spent is done.
            run("failed"),
            run("failed", completed=True),
            run("succeeded", completed=True),
            run("gated", completed=True),
            *(delivery("pending") for _ in range(4)),
            delivery("succeeded"),
            delivery("failed"),
            source(1, failures=3),
            source(2, failures=1),
            source(3, failures=0),
        ]
    )
    db.commit()  # the scrape reads through its own session (a savepoint here)
    after = gauges(client)
    assert [a - b for a, b in zip(after, before, strict=True)] == [3, 2, 1, 4, 2]


def test_metrics_token_is_required_when_set(settings: Settings, session_factory: Any) -> None:
    settings.metrics_token = "scrape-secret"
    with TestClient(create_app(settings=settings, session_factory=session_factory)) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = client.get("/metrics", headers={"Authorization": "Bearer scrape-secret"})
        assert ok.status_code == 200 and "tidings_queue_depth" in ok.text
    # Set, it is required from the allowed networks too, and it opens the scrape from anywhere.
    assert scrape(settings, session_factory, "127.0.0.1").status_code == 401
    public = scrape(settings, session_factory, "203.0.113.9", Authorization="Bearer scrape-secret")
    assert public.status_code == 200


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1", 200),
        ("127.8.9.10", 200),
        ("::1", 200),
        ("10.1.2.3", 200),
        ("172.20.0.5", 200),  # a docker compose network
        ("192.168.1.20", 200),
        ("fd00::7", 200),
        ("::ffff:10.0.0.5", 200),  # an IPv4 client on a dual-stack socket
        ("203.0.113.9", 403),
        ("172.32.0.1", 403),
        ("2001:db8::1", 403),
        ("::ffff:203.0.113.9", 403),
        ("testclient", 403),  # not an address at all
    ],
)
def test_by_default_only_loopback_and_private_networks_may_scrape(
    settings: Settings, session_factory: Any, host: str, status: int
) -> None:
    response = scrape(settings, session_factory, host)
    assert response.status_code == status, response.text
    if status == 403:
        assert "TIDINGS_METRICS_ALLOWED_NETWORKS" in response.text
        assert "tidings_" not in response.text
    else:
        assert "tidings_queue_depth" in response.text


def test_the_allowed_networks_are_a_setting(settings: Settings, session_factory: Any) -> None:
    settings.metrics_allowed_networks = "203.0.113.0/24, 2001:db8::5"
    assert scrape(settings, session_factory, "203.0.113.200").status_code == 200
    assert scrape(settings, session_factory, "2001:db8::5").status_code == 200
    assert scrape(settings, session_factory, "127.0.0.1").status_code == 403
    settings.metrics_allowed_networks = ""
    assert scrape(settings, session_factory, "127.0.0.1").status_code == 403


@pytest.mark.parametrize("value", ["10.0.0.0/33", "localhost", "10.0.0.0/8,,nope"])
def test_a_network_that_does_not_parse_stops_the_settings(value: str) -> None:
    with pytest.raises(ValidationError, match="is not a network"):
        Settings(metrics_allowed_networks=value)


def test_a_served_process_refuses_outside_scrapes(database_url: str, tmp_path: Path) -> None:
    with served_app(database_url, tmp_path / "var") as base:
        assert httpx.get(f"{base}/metrics").status_code == 200
    with served_app(database_url, tmp_path / "var", TIDINGS_METRICS_ALLOWED_NETWORKS="10.0.0.0/8") as base:
        refused = httpx.get(f"{base}/metrics")
        assert refused.status_code == 403 and "tidings_" not in refused.text


def test_request_ids_are_echoed_or_made_up(client: TestClient) -> None:
    given = client.get("/healthz", headers={"X-Request-ID": "abc-123.x_y"})
    assert given.headers["x-request-id"] == "abc-123.x_y"
    made = client.get("/healthz", headers={"X-Request-ID": "no spaces\tor tabs allowed" * 5})
    assert made.headers["x-request-id"] != "" and " " not in made.headers["x-request-id"]
    assert client.get("/healthz").headers["x-request-id"] != made.headers["x-request-id"]


def test_json_log_lines_carry_the_request_id() -> None:
    record = logging.LogRecord("tidings", logging.WARNING, __file__, 1, "sent %d", (3,), None)
    token = REQUEST_ID.set("req-42")
    try:
        line = json.loads(JsonFormatter().format(record))
    finally:
        REQUEST_ID.reset(token)
    assert line["message"] == "sent 3" and line["level"] == "warning" and line["request_id"] == "req-42"
    assert "request_id" not in json.loads(JsonFormatter().format(record))
