"""GET /v1/openapi.yaml (equal to the committed openapi/feeds.yaml, a valid OpenAPI 3 document that
describes every feed and watch route), and GET|PUT /v1/telemetry."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from openapi_spec_validator import validate
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.feeds.jobs import FeedJobs
from app.watches.run_queue import enqueue_first_runs
from tests.conftest import ApiUser
from tests.upstream import Upstream

COMMITTED = Path(__file__).resolve().parents[2] / "openapi" / "feeds.yaml"
ROUTES = {
    ("get", "/v1/feeds"),
    ("post", "/v1/feeds"),
    ("get", "/v1/feeds/{feed_id}"),
    ("put", "/v1/feeds/{feed_id}"),
    ("patch", "/v1/feeds/{feed_id}"),
    ("delete", "/v1/feeds/{feed_id}"),
    ("get", "/v1/feeds/{feed_id}/sources"),
    ("put", "/v1/feeds/{feed_id}/sources"),
    ("post", "/v1/feeds/{feed_id}/sources"),
    ("get", "/v1/feeds/{feed_id}/items"),
    ("post", "/v1/feeds/{feed_id}/sources/seek"),
    ("get", "/v1/feed-sources/{source_id}"),
    ("delete", "/v1/feed-sources/{source_id}"),
    ("post", "/v1/feed-sources/{source_id}/seek"),
    ("get", "/v1/feed-items/{item_id}"),
    ("get", "/v1/telemetry"),
    ("put", "/v1/telemetry"),
    ("post", "/v1/telemetry"),
    ("get", "/v1/watches"),
    ("post", "/v1/watches"),
    ("get", "/v1/watches/{watch_id}"),
    ("put", "/v1/watches/{watch_id}"),
    ("patch", "/v1/watches/{watch_id}"),
    ("delete", "/v1/watches/{watch_id}"),
    ("get", "/v1/watches/{watch_id}/actions"),
    ("post", "/v1/watches/{watch_id}/actions"),
    ("get", "/v1/actions/{action_id}"),
    ("put", "/v1/actions/{action_id}"),
    ("delete", "/v1/actions/{action_id}"),
    ("get", "/v1/actions/{action_id}/activity"),
    ("get", "/v1/actions/{action_id}/deliveries"),
    ("get", "/v1/action-activity/{run_id}"),
    ("get", "/v1/action-deliveries/{delivery_id}"),
    ("post", "/v1/actions/{action_id}/backfill"),
    ("get", "/v1/action-backfills"),
    ("get", "/v1/action-backfills/{backfill_id}"),
    ("get", "/v1/engines"),
}
PUBLIC_AUTH_ROUTES = {
    ("post", "/v1/auth/signup"),
    ("post", "/v1/auth/login"),
    ("post", "/v1/auth/device-sessions"),
    ("post", "/v1/auth/device-sessions/token"),
    ("get", "/v1/auth/device-sessions/{session_id}"),
    ("post", "/v1/auth/tokens/refresh"),
    ("post", "/v1/auth/tokens/revoke"),
}
AUTH_ROUTES = {
    ("post", "/v1/auth/logout"),
    ("get", "/v1/auth/me"),
    ("get", "/v1/auth/tokens"),
    ("post", "/v1/auth/tokens"),
    ("delete", "/v1/auth/tokens/{token_id}"),
    ("get", "/v1/auth/cli-tokens"),
    ("post", "/v1/auth/cli-tokens"),
    ("delete", "/v1/auth/cli-tokens/{token_id}"),
    ("post", "/v1/auth/device-sessions/{user_code}/complete"),
}


@pytest.fixture
def served(client: TestClient) -> dict[str, Any]:
    response = client.get("/v1/openapi.yaml")  # public
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/yaml")
    document: dict[str, Any] = yaml.safe_load(response.text)
    return document


def test_the_served_document_equals_the_committed_one_and_is_valid(served: dict[str, Any]) -> None:
    committed = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))
    assert served == committed, "openapi/feeds.yaml is stale: run `tidings openapi` and commit the result"
    validate(served)


def test_every_route_is_described_with_its_inputs(served: dict[str, Any], client: TestClient) -> None:
    described = {(m, p) for p, item in served["paths"].items() for m in item}
    assert described == ROUTES | AUTH_ROUTES | PUBLIC_AUTH_ROUTES
    for method, path in PUBLIC_AUTH_ROUTES:
        operation = served["paths"][path][method]
        assert operation["security"] == [], (method, path)
    for method, path in AUTH_ROUTES:
        assert "401" in served["paths"][path][method]["responses"], (method, path)
        url = re.sub(r"\{[a-z_]+\}", "1", path)
        assert client.request(method.upper(), url).status_code == 401, (method, path)
    schemas = served["components"]["schemas"]
    assert {"FeedInput", "SourceInput", "SourceSetPayload", "FeedItemWire", "TelemetryState"} <= set(schemas)
    for method, path in ROUTES:
        operation = served["paths"][path][method]
        assert "401" in operation["responses"], (method, path)
        names = {p["name"] for p in operation.get("parameters", [])}
        if method in ("post", "put", "patch", "delete") and path != "/v1/telemetry":
            assert "dry_run" in names, (method, path)
        if (method, path) in {("get", "/v1/feeds"), ("get", "/v1/feeds/{feed_id}/items")}:
            assert {"limit", "after"} <= names
        url = re.sub(r"\{[a-z_]+\}", "01ARZ3NDEKTSV4RRFFQ69G5FAV", path)
        assert client.request(method.upper(), url).status_code == 401, (method, path)
    assert served["components"]["securitySchemes"]["bearerAuth"] == {"type": "http", "scheme": "bearer"}


def test_telemetry_is_off_and_only_staff_may_change_it(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    assert client.get("/v1/telemetry", headers=api_user.headers).json() == {
        "mode": "off",
        "can_set": False,
        "emitting": False,
    }
    refused = client.put("/v1/telemetry", json={"mode": "on"}, headers=api_user.headers)
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden"
    staff = make_user(is_staff=True)
    assert client.get("/v1/telemetry", headers=staff.headers).json()["can_set"] is True
    bad = client.put("/v1/telemetry", json={"mode": "loud"}, headers=staff.headers)
    assert bad.status_code == 400
    assert "mode" in bad.json()["detail"]
    on = client.put("/v1/telemetry", json={"mode": "on"}, headers=staff.headers)
    assert on.status_code == 200
    # Opted in, but no destination is configured: nothing would be sent.
    assert on.json() == {"mode": "on", "can_set": True, "emitting": False}
    assert client.get("/v1/telemetry", headers=api_user.headers).json()["mode"] == "on"


def test_an_event_leaves_only_after_opting_in_and_carries_only_counts(
    client: TestClient,
    make_user: Any,
    upstream: Upstream,
    settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    upstream.serve("/collect", "", 204)
    configured = settings.model_copy(update={"telemetry_url": upstream.url("/collect")})
    client.app.state.settings = configured  # type: ignore[attr-defined]
    staff = make_user(is_staff=True)
    client.post(
        "/v1/feeds",
        json={
            "name": "Secret name",
            "sources": [{"spec": {"kind": "rss", "url": "https://private.example/feed"}}],
        },
        headers=staff.headers,
    )

    def send() -> None:
        async def main() -> None:
            jobs = FeedJobs(configured, session_factory, on_new_items=enqueue_first_runs)
            try:
                await jobs.send_telemetry()
            finally:
                await jobs.aclose()

        asyncio.run(main())

    send()
    assert upstream.seen == []  # off by default
    assert client.put("/v1/telemetry", json={"mode": "on"}, headers=staff.headers).json()["emitting"] is True
    send()
    send()  # at most one a day
    (request,) = upstream.requests_to("/collect")
    assert request.method == "POST"
    event = json.loads(request.body)
    assert set(event) == {"event", "installation_id", "version", "feeds", "sources_by_kind"}
    assert event["feeds"] >= 1
    assert event["sources_by_kind"]["rss"] >= 1
    assert "Secret" not in request.body.decode() and "private.example" not in request.body.decode()
    client.put("/v1/telemetry", json={"mode": "off"}, headers=staff.headers)
    send()
    assert len(upstream.seen) == 1
