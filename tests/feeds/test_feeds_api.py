"""/v1/feeds: create, read, edit, pause, delete and list, with dry runs, account scoping, cursors,
optional trailing slashes and credentials."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.models import Feed, FeedItem, Source
from tests.conftest import ApiUser
from tests.factories import count_rows
from tests.feeds.conftest import make_feed

RSS = {"spec": {"kind": "rss", "url": "https://example.com/feed.xml", "name": "Example"}}
HN = {"spec": {"kind": "board_feed", "feed": "show", "query": "rust", "match": "any"}}
COMMENTS = {"spec": {"kind": "board_comment", "query": "sqlite"}}
REDDIT = {"spec": {"kind": "forum_community", "community": "r/Python"}, "meta": {"team": "a"}}

FEED_KEYS = {
    "id",
    "name",
    "kind",
    "is_active",
    "poll_interval_seconds",
    "user_id",
    "data",
    "created_at",
    "last_polled_at",
    "next_poll_at",
    "last_error",
    "consecutive_failures",
}
VIEW_KEYS = FEED_KEYS | {"source_count", "sources", "summary"}
SOURCE_KEYS = {
    "id",
    "spec",
    "display",
    "meta",
    "field_map",
    "last_event_at",
    "created_at",
    "last_polled_at",
    "last_error",
    "consecutive_failures",
    "retry_at",
}


def test_create_answers_201_with_the_feed_its_sources_and_defaults(
    client: TestClient, api_user: ApiUser
) -> None:
    body = make_feed(client, api_user.headers, [RSS, HN, COMMENTS, REDDIT])
    assert set(body) == VIEW_KEYS | {"dry_run"}
    assert body["dry_run"] is False
    assert len(body["id"]) == 26
    assert body["kind"] == "curated"
    assert body["is_active"] is True
    assert body["poll_interval_seconds"] == 300
    assert body["user_id"] == str(api_user.user_id)
    assert body["data"] == {"default_field_map": {}, "retention_days": 30}
    assert body["summary"] == {}
    assert body["created_at"].endswith("Z")
    assert body["next_poll_at"] is not None  # due at once
    assert body["source_count"] == 4
    sources = body["sources"]
    assert all(set(s) == SOURCE_KEYS for s in sources)
    assert [s["display"] for s in sources] == [
        "Example",
        "HN show: rust (any word)",
        "HN comments: sqlite",
        "r/Python",
    ]
    assert sources[1]["spec"] == {"kind": "board_feed", "feed": "show", "match": "any", "query": "rust"}
    assert sources[2]["spec"] == {"kind": "board_comment", "match": "all", "query": "sqlite"}
    assert sources[3]["spec"] == {"kind": "forum_community", "community": "Python"}
    assert sources[3]["meta"] == {"team": "a"}
    # Live mode: the watermark starts now.
    assert all(s["last_event_at"] is not None for s in sources)
    view = client.get(f"/v1/feeds/{body['id']}", headers=api_user.headers).json()
    assert {k: v for k, v in body.items() if k != "dry_run"} == view


@pytest.mark.parametrize("word", ["1", "true", "TRUE", "yes", "on", "On"])
def test_a_dry_run_create_validates_stores_nothing_and_answers_200(
    client: TestClient, api_user: ApiUser, db: Session, word: str
) -> None:
    response = client.post(
        f"/v1/feeds?dry_run={word}",
        json={"name": "Preview", "sources": [RSS, RSS, HN]},
        headers=api_user.headers,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["dry_run"] is True
    assert body["id"] is None
    assert body["source_count"] == 2  # the repeated spec counts once
    assert [s["id"] for s in body["sources"]] == ["", ""]
    assert count_rows(db, Feed) == 0
    assert count_rows(db, Source) == 0


@pytest.mark.parametrize("word", ["0", "false", "no", "off", "maybe", ""])
def test_other_dry_run_values_are_real_writes(client: TestClient, api_user: ApiUser, word: str) -> None:
    response = client.post(f"/v1/feeds?dry_run={word}", json={"name": "Real"}, headers=api_user.headers)
    assert response.status_code == 201
    assert response.json()["dry_run"] is False


def test_a_dry_run_create_still_refuses_invalid_input(client: TestClient, api_user: ApiUser) -> None:
    response = client.post("/v1/feeds?dry_run=1", json={"name": ""}, headers=api_user.headers)
    assert response.status_code == 400
    assert response.json() == {"error": "validation_error", "detail": {"name": ["Must not be blank."]}}


def test_list_is_newest_first_with_cursors(client: TestClient, api_user: ApiUser) -> None:
    ids = [make_feed(client, api_user.headers, [], name=f"F{i}")["id"] for i in range(5)]
    page = client.get("/v1/feeds?limit=2", headers=api_user.headers).json()
    assert [f["id"] for f in page["items"]] == ids[::-1][:2]
    assert set(page["items"][0]) == FEED_KEYS
    assert page["next_cursor"] == ids[3]
    second = client.get(f"/v1/feeds?limit=2&after={page['next_cursor']}", headers=api_user.headers).json()
    assert [f["id"] for f in second["items"]] == [ids[2], ids[1]]
    third = client.get(f"/v1/feeds?limit=2&after={second['next_cursor']}", headers=api_user.headers).json()
    assert [f["id"] for f in third["items"]] == [ids[0]]
    assert third["next_cursor"] is None
    # Lower-case ids are the same ids.
    again = client.get(
        f"/v1/feeds?limit=2&after={page['next_cursor'].lower()}", headers=api_user.headers
    ).json()
    assert again == second
    # A limit that is not a positive integer means the default; above 200 means 200.
    for limit in ("abc", "-3", "0", "2.5"):
        assert len(client.get(f"/v1/feeds?limit={limit}", headers=api_user.headers).json()["items"]) == 5
    assert client.get("/v1/feeds?limit=100000", headers=api_user.headers).status_code == 200


def test_an_after_that_is_not_an_id_is_400(client: TestClient, api_user: ApiUser) -> None:
    response = client.get("/v1/feeds?after=12", headers=api_user.headers)
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert "after" in response.json()["detail"]


def test_trailing_slashes_are_optional(client: TestClient, api_user: ApiUser) -> None:
    feed = make_feed(client, api_user.headers, [RSS])
    assert client.get("/v1/feeds/", headers=api_user.headers).status_code == 200
    assert client.get(f"/v1/feeds/{feed['id']}/", headers=api_user.headers).status_code == 200
    assert client.get(f"/v1/feeds/{feed['id']}/sources/", headers=api_user.headers).status_code == 200
    assert client.get(f"/v1/feeds/{feed['id']}/items/", headers=api_user.headers).status_code == 200
    assert client.get("/v1/telemetry/", headers=api_user.headers).status_code == 200
    created = client.post("/v1/feeds/", json={"name": "Slash"}, headers=api_user.headers)
    assert created.status_code == 201


def test_feeds_of_another_account_and_unknown_ids_are_404(
    client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    feed = make_feed(client, api_user.headers, [RSS])
    other = make_user()
    for method, path, body in [
        ("GET", f"/v1/feeds/{feed['id']}", None),
        ("PUT", f"/v1/feeds/{feed['id']}", {"name": "x"}),
        ("PATCH", f"/v1/feeds/{feed['id']}", {"is_active": False}),
        ("DELETE", f"/v1/feeds/{feed['id']}", None),
        ("GET", f"/v1/feeds/{feed['id']}/sources", None),
        ("POST", f"/v1/feeds/{feed['id']}/sources", []),
        ("GET", f"/v1/feeds/{feed['id']}/items", None),
    ]:
        response = client.request(method, path, json=body, headers=other.headers)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"] == "not_found"
    assert client.get("/v1/feeds", headers=other.headers).json() == {"items": [], "next_cursor": None}
    for bad in ("nope", "0" * 26, "Z" * 26, "01ARZ3NDEKTSV4RRFFQ69G5FA"):
        assert client.get(f"/v1/feeds/{bad}", headers=api_user.headers).status_code == 404


def test_edit_replaces_settings_and_keeps_sources_unless_given(client: TestClient, api_user: ApiUser) -> None:
    feed = make_feed(client, api_user.headers, [RSS, HN])
    body = {
        "name": "Renamed",
        "poll_interval_seconds": 900,
        "data": {"retention_days": 7, "default_field_map": {"title": "headline"}},
        "unknown": "ignored",
    }
    response = client.put(f"/v1/feeds/{feed['id']}", json=body, headers=api_user.headers)
    assert response.status_code == 200, response.text
    edited = response.json()
    assert edited["dry_run"] is False
    assert edited["name"] == "Renamed"
    assert edited["poll_interval_seconds"] == 900
    assert edited["data"] == {"retention_days": 7, "default_field_map": {"title": "headline"}}
    assert [s["id"] for s in edited["sources"]] == [s["id"] for s in feed["sources"]]
    # With sources: replaced by diff (the RSS source is kept with its id, HN goes, Reddit comes).
    body["sources"] = [RSS, REDDIT]
    edited = client.put(f"/v1/feeds/{feed['id']}", json=body, headers=api_user.headers).json()
    assert edited["sources"][0]["id"] == feed["sources"][0]["id"]
    assert [s["display"] for s in edited["sources"]] == ["Example", "r/Python"]


def test_a_dry_run_edit_previews_and_stores_nothing(client: TestClient, api_user: ApiUser) -> None:
    feed = make_feed(client, api_user.headers, [RSS, HN])
    preview = client.put(
        f"/v1/feeds/{feed['id']}?dry_run=true",
        json={"name": "Maybe", "is_active": False, "sources": [HN, COMMENTS]},
        headers=api_user.headers,
    )
    assert preview.status_code == 200
    body = preview.json()
    assert body["dry_run"] is True
    assert body["id"] == feed["id"]
    assert body["name"] == "Maybe"
    assert body["is_active"] is False
    assert [s["id"] for s in body["sources"]] == [feed["sources"][1]["id"], ""]
    unchanged = client.get(f"/v1/feeds/{feed['id']}", headers=api_user.headers).json()
    assert unchanged["name"] == "Feed"
    assert unchanged["source_count"] == 2
    assert [s["id"] for s in unchanged["sources"]] == [s["id"] for s in feed["sources"]]


def test_an_unknown_kind_is_refused_on_create(client: TestClient, api_user: ApiUser, db: Session) -> None:
    for params in ({}, {"dry_run": "1"}):
        response = client.post(
            "/v1/feeds", params=params, json={"name": "x", "kind": "discovered"}, headers=api_user.headers
        )
        assert response.status_code == 400
        assert "kind" in response.json()["detail"]
    assert count_rows(db, Feed) == 0


def test_putting_another_kind_is_409_kind_immutable(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    """CONTRACT: changing `kind` is 409 `kind_immutable`, whether or not the new kind exists."""
    feed = make_feed(client, api_user.headers, [])
    for kind in ("discovered", "", "Curated"):
        for params in ({}, {"dry_run": "true"}):
            response = client.put(
                f"/v1/feeds/{feed['id']}",
                params=params,
                json={"name": "renamed", "kind": kind},
                headers=api_user.headers,
            )
            assert response.status_code == 409, response.text
            assert response.json()["error"] == "kind_immutable"
    db.expire_all()
    row = db.get(Feed, feed["id"])
    assert row is not None and row.kind == "curated" and row.name == "Feed"


def test_kind_immutable_conflict(client: TestClient, api_user: ApiUser, db: Session) -> None:
    feed = make_feed(client, api_user.headers, [])
    row = db.get(Feed, feed["id"])
    assert row is not None
    row.kind = "legacy"
    db.commit()
    response = client.put(f"/v1/feeds/{feed['id']}", json={"name": "x"}, headers=api_user.headers)
    assert response.status_code == 409
    assert response.json()["error"] == "kind_immutable"


def test_patch_pauses_and_resumes(client: TestClient, api_user: ApiUser) -> None:
    feed = make_feed(client, api_user.headers, [RSS])
    paused = client.patch(f"/v1/feeds/{feed['id']}", json={"is_active": False}, headers=api_user.headers)
    assert paused.status_code == 200
    assert paused.json()["is_active"] is False
    assert paused.json()["next_poll_at"] is None
    dry = client.patch(
        f"/v1/feeds/{feed['id']}?dry_run=1", json={"is_active": True}, headers=api_user.headers
    )
    assert dry.json()["is_active"] is True and dry.json()["dry_run"] is True
    assert client.get(f"/v1/feeds/{feed['id']}", headers=api_user.headers).json()["is_active"] is False
    resumed = client.patch(f"/v1/feeds/{feed['id']}", json={"is_active": True}, headers=api_user.headers)
    assert resumed.json()["is_active"] is True
    assert resumed.json()["next_poll_at"] is not None
    missing = client.patch(f"/v1/feeds/{feed['id']}", json={"name": "x"}, headers=api_user.headers)
    assert missing.status_code == 400
    assert missing.json()["detail"] == {"is_active": ["This field is required."]}


def test_delete_removes_the_feed_with_its_sources_and_items(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    feed = make_feed(client, api_user.headers, [RSS, HN])
    dry = client.delete(f"/v1/feeds/{feed['id']}?dry_run=on", headers=api_user.headers)
    assert dry.status_code == 200
    assert dry.json()["dry_run"] is True
    assert dry.json()["id"] == feed["id"]
    assert count_rows(db, Source) == 2
    response = client.delete(f"/v1/feeds/{feed['id']}", headers=api_user.headers)
    assert response.status_code == 204
    assert response.content == b""
    assert client.get(f"/v1/feeds/{feed['id']}", headers=api_user.headers).status_code == 404
    assert count_rows(db, Source) == 0
    assert count_rows(db, FeedItem) == 0


def test_every_feed_route_needs_credentials(client: TestClient, api_user: ApiUser) -> None:
    feed = make_feed(client, api_user.headers, [RSS])
    for method, path in [
        ("GET", "/v1/feeds"),
        ("POST", "/v1/feeds"),
        ("GET", f"/v1/feeds/{feed['id']}"),
        ("PUT", f"/v1/feeds/{feed['id']}"),
        ("PATCH", f"/v1/feeds/{feed['id']}"),
        ("DELETE", f"/v1/feeds/{feed['id']}"),
        ("GET", f"/v1/feeds/{feed['id']}/sources"),
        ("PUT", f"/v1/feeds/{feed['id']}/sources"),
        ("POST", f"/v1/feeds/{feed['id']}/sources"),
        ("GET", f"/v1/feeds/{feed['id']}/items"),
        ("GET", "/v1/telemetry"),
        ("PUT", "/v1/telemetry"),
    ]:
        for headers in ({}, {"Authorization": "Bearer tdg_not_a_token"}, {"Authorization": "Basic abc"}):
            response = client.request(method, path, json={"name": "x"}, headers=headers)
            assert response.status_code == 401, (method, path, headers)
            assert response.json()["error"] == "not_authenticated"
            assert set(response.json()) == {"error", "detail"}


def test_unknown_v1_paths_are_404_in_the_v1_shape(client: TestClient, api_user: ApiUser) -> None:
    response = client.get("/v1/nope", headers=api_user.headers)
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
