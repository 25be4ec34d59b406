"""GET /metrics (request counters by route template, queue depths), request ids, JSON log lines."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi.testclient import TestClient

from app.config import Settings
from app.logs import REQUEST_ID, JsonFormatter
from app.main import create_app


def sample(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{key}="{value}"' for key, value in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}} "):
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


def test_metrics_token_is_required_when_set(settings: Settings, session_factory: Any) -> None:
    settings.metrics_token = "scrape-secret"
    with TestClient(create_app(settings=settings, session_factory=session_factory)) as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = client.get("/metrics", headers={"Authorization": "Bearer scrape-secret"})
        assert ok.status_code == 200 and "tidings_queue_depth" in ok.text


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
