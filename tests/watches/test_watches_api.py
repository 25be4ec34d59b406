"""/v1/watches and their action chains: create, read, edit, patch, delete and list, adding, editing,
moving and deleting actions, webhook secrecy, dry runs, account scoping and validation."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.models import Watch, WatchAction, WatchFeed
from tests.conftest import ApiUser
from tests.factories import count_rows
from tests.watches.conftest import make_feed, make_watch

FILTER = {"kind": "semantic_filter", "config": {"instructions": "Posts about Rust"}}
EXTRACT = {
    "kind": "extract",
    "config": {
        "fields": [{"name": "company", "description": "The company named"}],
        "instructions": "Be brief",
    },
}
LOG = {"kind": "log", "config": {"prefix": "[rust]", "include_fields": ["title", "url"]}}
HOOK = {
    "kind": "webhook",
    "config": {
        "url": "https://hooks.example.com/services/T000/B000/secret-token?sig=abc",
        "headers": {"Authorization": "Bearer very-secret", "X-Team": "core"},
    },
}
WATCH_KEYS = {"id", "name", "is_active", "feed_ids", "user_id", "created_at"}
ACTION_KEYS = {"id", "kind", "rank", "config", "summary", "created_at"}


def test_create_answers_201_with_the_chain_in_order_and_defaults(
    client: TestClient, api_user: ApiUser
) -> None:
    feed = make_feed(client, api_user.headers, [])
    body = make_watch(client, api_user.headers, [feed["id"]], [FILTER, EXTRACT, LOG, HOOK], name="Rust news")
    assert set(body) == WATCH_KEYS | {"actions", "dry_run"}
    assert body["dry_run"] is False
    assert len(body["id"]) == 26
    assert body["name"] == "Rust news"
    assert body["is_active"] is True
    assert body["feed_ids"] == [feed["id"]]
    assert body["user_id"] == str(api_user.user_id)
    assert body["created_at"].endswith("Z")
    actions = body["actions"]
    assert [a["kind"] for a in actions] == ["semantic_filter", "extract", "log", "webhook"]
    assert [a["rank"] for a in actions] == [0, 1, 2, 3]
    assert all(set(a) == ACTION_KEYS for a in actions)
    assert actions[0]["config"] == {
        "instructions": "Posts about Rust",
        "engine": {"kind": "", "model": ""},
        "fetch_external_content": True,
        "threshold": 0.8,
    }
    assert actions[2]["config"] == {
        "delivery": "instant",
        "digest_interval_seconds": 0,
        "include_fields": ["title", "url"],
        "prefix": "[rust]",
    }
    assert actions[3]["config"]["method"] == "POST"
    assert all(a["summary"]["detail"] for a in actions)
    assert "0.80" in actions[0]["summary"]["detail"]
    assert "company" in actions[1]["summary"]["detail"]
    assert "hooks.example.com" in actions[3]["summary"]["detail"]
    view = client.get(f"/v1/watches/{body['id']}", headers=api_user.headers)
    assert view.status_code == 200
    assert {k: v for k, v in body.items() if k != "dry_run"} == view.json()
    listed = client.get(f"/v1/watches/{body['id']}/actions", headers=api_user.headers).json()
    assert listed == {"items": actions}


def test_webhook_secrets_are_masked_in_every_response_and_kept_on_edit(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    watch = make_watch(client, api_user.headers, [], [HOOK])
    hook = watch["actions"][0]
    masked = {"url": "https://hooks.example.com/***", "headers": {"Authorization": "***", "X-Team": "***"}}
    assert {k: hook["config"][k] for k in ("url", "headers")} == masked
    for path in (
        f"/v1/watches/{watch['id']}",
        f"/v1/actions/{hook['id']}",
        f"/v1/watches/{watch['id']}/actions",
    ):
        text = client.get(path, headers=api_user.headers).text
        assert "secret" not in text and "sig=abc" not in text and "core" not in text, path
    assert "secret" not in client.get("/v1/watches", headers=api_user.headers).text
    # The masked values sent back keep the stored ones; a changed header is taken as sent.
    sent = {**hook["config"], "headers": {"Authorization": "***", "X-Team": "platform"}, "method": "put"}
    edited = client.put(
        f"/v1/actions/{hook['id']}", json={"kind": "webhook", "config": sent}, headers=api_user.headers
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["action"]["config"]["headers"] == {"Authorization": "***", "X-Team": "***"}
    assert edited.json()["action"]["config"]["method"] == "PUT"
    stored = db.get(WatchAction, hook["id"])
    assert stored is not None
    db.refresh(stored)
    assert stored.config["url"] == HOOK["config"]["url"]
    assert stored.config["headers"] == {"Authorization": "Bearer very-secret", "X-Team": "platform"}
    # A whole-chain edit keeps them too, matched by the action's id.
    view = client.get(f"/v1/watches/{watch['id']}", headers=api_user.headers).json()
    again = client.put(f"/v1/watches/{watch['id']}", json=view, headers=api_user.headers)
    assert again.status_code == 200, again.text
    assert again.json()["actions"][0]["id"] == hook["id"]
    db.refresh(stored)
    assert stored.config["headers"]["Authorization"] == "Bearer very-secret"
    assert stored.config["url"] == HOOK["config"]["url"]
    # A new path on the same host keeps the masked header's stored value.
    same_host = {**sent, "url": "https://hooks.example.com/T000/B000/other"}
    moved = client.put(
        f"/v1/actions/{hook['id']}", json={"kind": "webhook", "config": same_host}, headers=api_user.headers
    )
    assert moved.status_code == 200, moved.text
    db.refresh(stored)
    assert stored.config["url"] == "https://hooks.example.com/T000/B000/other"
    assert stored.config["headers"]["Authorization"] == "Bearer very-secret"
    # Another host (or scheme, or port) must be sent the header values again: a stored secret never
    # follows the webhook to a destination of the caller's choosing.
    for elsewhere in (
        "https://other.example.org/hook/2",
        "http://hooks.example.com/T000/B000/other",
        "https://hooks.example.com:8443/T000/B000/other",
    ):
        refused = client.put(
            f"/v1/actions/{hook['id']}",
            json={"kind": "webhook", "config": {**sent, "url": elsewhere}},
            headers=api_user.headers,
        )
        assert refused.status_code == 400, (elsewhere, refused.text)
        assert set(refused.json()["detail"]) == {"config.headers.Authorization"}
        db.refresh(stored)
        assert stored.config["url"] == "https://hooks.example.com/T000/B000/other"
    resent = {**sent, "url": "https://other.example.org/hook/2", "headers": {"Authorization": "Bearer new"}}
    taken = client.put(
        f"/v1/actions/{hook['id']}", json={"kind": "webhook", "config": resent}, headers=api_user.headers
    )
    assert taken.status_code == 200, taken.text
    db.refresh(stored)
    assert stored.config["url"] == "https://other.example.org/hook/2"
    assert stored.config["headers"] == {"Authorization": "Bearer new"}


def test_a_masked_secret_with_nothing_to_keep_is_refused(client: TestClient, api_user: ApiUser) -> None:
    masked = {"kind": "webhook", "config": {"url": "https://hooks.example.com/***", "headers": {"A": "***"}}}
    response = client.post("/v1/watches", json={"name": "W", "actions": [masked]}, headers=api_user.headers)
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert set(detail) == {"actions[0].config.url", "actions[0].config.headers.A"}


@pytest.mark.parametrize("word", ["1", "true", "yes", "on"])
def test_dry_runs_store_nothing(client: TestClient, api_user: ApiUser, db: Session, word: str) -> None:
    feed = make_feed(client, api_user.headers, [])
    created = client.post(
        f"/v1/watches?dry_run={word}",
        json={"name": "Preview", "feed_ids": [feed["id"]], "actions": [FILTER, HOOK]},
        headers=api_user.headers,
    )
    assert created.status_code == 200, created.text
    body = created.json()
    assert body["dry_run"] is True and body["id"] is None
    assert [a["id"] for a in body["actions"]] == ["", ""]
    assert body["actions"][1]["config"]["url"] == "https://hooks.example.com/***"
    assert count_rows(db, Watch) == 0 and count_rows(db, WatchAction) == 0 and count_rows(db, WatchFeed) == 0
    watch = make_watch(client, api_user.headers, [feed["id"]], [FILTER])
    path = f"/v1/watches/{watch['id']}"
    edit = client.put(
        f"{path}?dry_run={word}", json={"name": "New", "actions": [LOG]}, headers=api_user.headers
    )
    assert edit.status_code == 200 and edit.json()["dry_run"] is True
    assert edit.json()["name"] == "New" and [a["kind"] for a in edit.json()["actions"]] == ["log"]
    patch = client.patch(f"{path}?dry_run={word}", json={"is_active": False}, headers=api_user.headers)
    assert patch.json()["is_active"] is False and patch.json()["dry_run"] is True
    added = client.post(f"{path}/actions?dry_run={word}", json={**LOG, "rank": 0}, headers=api_user.headers)
    assert added.status_code == 200
    assert added.json() == {"action": {**added.json()["action"], "id": "", "rank": 0}, "dry_run": True}
    action_id = watch["actions"][0]["id"]
    moved = client.put(
        f"/v1/actions/{action_id}?dry_run={word}", json={**FILTER, "rank": 3}, headers=api_user.headers
    )
    assert moved.status_code == 200 and moved.json()["dry_run"] is True
    gone = client.delete(f"/v1/actions/{action_id}?dry_run={word}", headers=api_user.headers)
    assert gone.status_code == 200 and gone.json()["action"]["id"] == action_id
    deleted = client.delete(f"{path}?dry_run={word}", headers=api_user.headers)
    assert deleted.status_code == 200 and deleted.json()["id"] == watch["id"]
    assert client.get(path, headers=api_user.headers).json() == {
        k: v for k, v in watch.items() if k != "dry_run"
    }


def test_actions_are_added_moved_and_deleted_with_dense_ranks(client: TestClient, api_user: ApiUser) -> None:
    watch = make_watch(client, api_user.headers, [], [FILTER, LOG])
    path = f"/v1/watches/{watch['id']}"
    added = client.post(f"{path}/actions", json=HOOK, headers=api_user.headers)
    assert added.status_code == 201, added.text
    assert added.json()["action"]["rank"] == 2 and added.json()["dry_run"] is False
    first = client.post(f"{path}/actions", json={**EXTRACT, "rank": 0}, headers=api_user.headers).json()[
        "action"
    ]
    assert first["rank"] == 0
    kinds = lambda: [a["kind"] for a in client.get(path, headers=api_user.headers).json()["actions"]]  # noqa: E731
    assert kinds() == ["extract", "semantic_filter", "log", "webhook"]
    moved = client.put(f"/v1/actions/{first['id']}", json={**EXTRACT, "rank": 9}, headers=api_user.headers)
    assert moved.status_code == 200 and moved.json()["action"]["rank"] == 3
    assert kinds() == ["semantic_filter", "log", "webhook", "extract"]
    assert (
        client.delete(f"/v1/actions/{watch['actions'][1]['id']}", headers=api_user.headers).status_code == 204
    )
    chain = client.get(path, headers=api_user.headers).json()["actions"]
    assert [(a["kind"], a["rank"]) for a in chain] == [("semantic_filter", 0), ("webhook", 1), ("extract", 2)]
    assert client.get(f"/v1/actions/{watch['actions'][1]['id']}", headers=api_user.headers).status_code == 404
    # A whole-chain edit: kept by id, new without one, the rest deleted; list order is the chain.
    replaced = client.put(
        path,
        json={
            "name": "W",
            "actions": [LOG, {**chain[2], "config": EXTRACT["config"]}, {"id": chain[0]["id"], **FILTER}],
        },
        headers=api_user.headers,
    ).json()["actions"]
    assert [a["kind"] for a in replaced] == ["log", "extract", "semantic_filter"]
    assert replaced[1]["id"] == chain[2]["id"] and replaced[2]["id"] == chain[0]["id"]
    unknown = client.put(
        path,
        json={"name": "W", "actions": [{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", **LOG}]},
        headers=api_user.headers,
    )
    assert unknown.status_code == 400 and "actions[0].id" in unknown.json()["detail"]


def test_put_patch_list_and_delete(client: TestClient, api_user: ApiUser, db: Session) -> None:
    feeds = [make_feed(client, api_user.headers, [], name=f"F{i}")["id"] for i in range(3)]
    watch = make_watch(client, api_user.headers, feeds[:2], [FILTER])
    path = f"/v1/watches/{watch['id']}"
    edited = client.put(
        path, json={"name": "Renamed", "feed_ids": [feeds[2], feeds[0]]}, headers=api_user.headers
    )
    assert edited.status_code == 200
    assert edited.json()["name"] == "Renamed" and set(edited.json()["feed_ids"]) == {feeds[2], feeds[0]}
    assert edited.json()["actions"] == watch["actions"]  # absent `actions` leaves the chain alone
    patched = client.patch(
        f"{path}/", json={"is_active": False, "unknown": 1}, headers=api_user.headers
    ).json()
    assert patched["is_active"] is False and patched["name"] == "Renamed"
    ids = [make_watch(client, api_user.headers, [], [], name=f"W{i}")["id"] for i in range(3)]
    page = client.get("/v1/watches?limit=2", headers=api_user.headers).json()
    assert [w["id"] for w in page["items"]] == ids[::-1][:2] and page["next_cursor"] == ids[1]
    assert set(page["items"][0]) == WATCH_KEYS
    rest = client.get(f"/v1/watches?limit=2&after={page['next_cursor']}", headers=api_user.headers).json()
    assert [w["id"] for w in rest["items"]] == [ids[0], watch["id"]] and rest["next_cursor"] == watch["id"]
    assert client.delete(path, headers=api_user.headers).status_code == 204
    assert client.get(path, headers=api_user.headers).status_code == 404
    assert count_rows(db, WatchAction) == 0
    # Deleting a feed drops it from the watches subscribed to it.
    other = make_watch(client, api_user.headers, [feeds[1]], [])
    client.delete(f"/v1/feeds/{feeds[1]}", headers=api_user.headers)
    assert client.get(f"/v1/watches/{other['id']}", headers=api_user.headers).json()["feed_ids"] == []


def test_other_accounts_see_nothing(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    feed = make_feed(client, api_user.headers, [])
    watch = make_watch(client, api_user.headers, [feed["id"]], [FILTER])
    action_id = watch["actions"][0]["id"]
    other = make_user()
    for method, path in [
        ("GET", f"/v1/watches/{watch['id']}"),
        ("PUT", f"/v1/watches/{watch['id']}"),
        ("PATCH", f"/v1/watches/{watch['id']}"),
        ("DELETE", f"/v1/watches/{watch['id']}"),
        ("GET", f"/v1/watches/{watch['id']}/actions"),
        ("POST", f"/v1/watches/{watch['id']}/actions"),
        ("GET", f"/v1/actions/{action_id}"),
        ("PUT", f"/v1/actions/{action_id}"),
        ("DELETE", f"/v1/actions/{action_id}"),
        ("GET", f"/v1/actions/{action_id}/activity"),
        ("GET", f"/v1/actions/{action_id}/deliveries"),
    ]:
        body = {"name": "x", **LOG} if method in ("PUT", "POST", "PATCH") else None
        response = client.request(method, path, json=body, headers=other.headers)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"] == "not_found"
    assert client.get("/v1/watches", headers=other.headers).json() == {"items": [], "next_cursor": None}
    # Another account's feed cannot be subscribed to.
    theirs = client.post("/v1/watches", json={"name": "x", "feed_ids": [feed["id"]]}, headers=other.headers)
    assert theirs.status_code == 400 and "feed_ids[0]" in theirs.json()["detail"]


@pytest.mark.parametrize(
    ("action", "field"),
    [
        ({"kind": "semantic_filter", "config": {}}, "config.instructions"),
        ({"kind": "semantic_filter", "config": {"instructions": "  "}}, "config.instructions"),
        ({"kind": "semantic_filter", "config": {"instructions": "x", "threshold": 0}}, "config.threshold"),
        ({"kind": "semantic_filter", "config": {"instructions": "x", "threshold": 1.01}}, "config.threshold"),
        (
            {"kind": "semantic_filter", "config": {"instructions": "x", "engine": {"kind": "gpt9"}}},
            "config.engine.kind",
        ),
        (
            {
                "kind": "extract",
                "config": {"fields": [{"name": "a", "description": "b"}], "engine": {"kind": "local"}},
            },
            "config.engine",
        ),
        ({"kind": "extract", "config": {}}, "config.fields"),
        (
            {"kind": "extract", "config": {"fields": [{"name": "a" * 65, "description": "d"}]}},
            "config.fields[0].name",
        ),
        (
            {"kind": "extract", "config": {"fields": [{"name": "a", "description": ""}]}},
            "config.fields[0].description",
        ),
        (
            {"kind": "extract", "config": {"fields": [{"name": "a", "description": "d" * 257}]}},
            "config.fields[0].description",
        ),
        (
            {
                "kind": "extract",
                "config": {"fields": [{"name": f"f{i}", "description": "d"} for i in range(65)]},
            },
            "config.fields",
        ),
        (
            {
                "kind": "extract",
                "config": {"fields": [{"name": "a", "description": "d"}], "instructions": "i" * 2049},
            },
            "config.instructions",
        ),
        ({"kind": "log", "config": {"digest_interval_seconds": -1}}, "config.digest_interval_seconds"),
        ({"kind": "log", "config": {"delivery": "weekly"}}, "config.delivery"),
        ({"kind": "webhook", "config": {}}, "config.url"),
        ({"kind": "webhook", "config": {"url": "ftp://example.com/x"}}, "config.url"),
        ({"kind": "webhook", "config": {"url": "https://example.com:99999/x"}}, "config.url"),
        ({"kind": "webhook", "config": {"url": "https://example.com/x", "method": "GET"}}, "config.method"),
        (
            {"kind": "webhook", "config": {"url": "https://example.com/x", "headers": {"Bad Name": "v"}}},
            "config.headers",
        ),
        (
            {"kind": "webhook", "config": {"url": "https://example.com/x", "headers": {"A": "v\r\nB: c"}}},
            "config.headers",
        ),
        ({"kind": "teleport", "config": {}}, "kind"),
        ({"kind": "log"}, "config"),
        ({"config": {}}, "kind"),
    ],
)
def test_invalid_actions_are_400_naming_the_field(
    client: TestClient, api_user: ApiUser, action: dict[str, Any], field: str
) -> None:
    created = client.post("/v1/watches", json={"name": "W", "actions": [action]}, headers=api_user.headers)
    assert created.status_code == 400, created.text
    assert created.json()["error"] == "validation_error"
    assert f"actions[0].{field}" in created.json()["detail"], created.json()
    watch = make_watch(client, api_user.headers, [], [])
    added = client.post(f"/v1/watches/{watch['id']}/actions", json=action, headers=api_user.headers)
    assert added.status_code == 400
    assert field in added.json()["detail"], added.json()


def test_limits_at_their_edges_are_accepted(client: TestClient, api_user: ApiUser) -> None:
    fields = [{"name": "n" * 64, "description": "d" * 256}] + [
        {"name": f"f{i}", "description": "d"} for i in range(63)
    ]
    actions = [
        {"kind": "semantic_filter", "config": {"instructions": "x", "threshold": 1}},
        {
            "kind": "semantic_filter",
            "config": {"instructions": "x", "threshold": 0.0001, "engine": {"kind": "openai_compat"}},
        },
        {"kind": "extract", "config": {"fields": fields, "instructions": "i" * 2048}},
        {"kind": "log", "config": {"delivery": "digest", "digest_interval_seconds": 0}},
        {
            "kind": "webhook",
            "config": {
                "url": "http://127.0.0.1:9/x",
                "method": "patch",
                "delivery": "digest",
                "digest_interval_seconds": 3600,
            },
        },
    ]
    watch = make_watch(client, api_user.headers, [], actions)
    assert [a["rank"] for a in watch["actions"]] == [0, 1, 2, 3, 4]
    assert len(watch["actions"][2]["config"]["fields"]) == 64


def test_watch_level_validation(client: TestClient, api_user: ApiUser) -> None:
    cases = [
        ({"name": ""}, "name"),
        ({}, "name"),
        ({"name": "W", "feed_ids": ["nope"]}, "feed_ids[0]"),
        ({"name": "W", "feed_ids": "abc"}, "feed_ids"),
        ({"name": "W", "is_active": "maybe"}, "is_active"),
        ({"name": "W", "actions": {"kind": "log"}}, "actions"),
        (
            {"name": "W", "actions": [LOG, {"kind": "log", "config": {"prefix": 5}}]},
            "actions[1].config.prefix",
        ),
    ]
    for body, field in cases:
        response = client.post("/v1/watches", json=body, headers=api_user.headers)
        assert response.status_code == 400, (body, response.text)
        assert field in response.json()["detail"], (body, response.json())


def test_webhooks_to_non_public_addresses_are_refused_unless_allowed(
    client: TestClient, api_user: ApiUser, settings: Any
) -> None:
    settings.outbound_allow_private = False
    hook = {"kind": "webhook", "config": {"url": "http://169.254.169.254/latest/meta-data"}}
    response = client.post("/v1/watches", json={"name": "W", "actions": [hook]}, headers=api_user.headers)
    assert response.status_code == 400
    assert "non-public" in response.json()["detail"]["actions[0].config.url"][0]


def test_credentials_are_required(client: TestClient) -> None:
    for method, path in [("GET", "/v1/watches"), ("POST", "/v1/watches"), ("GET", "/v1/engines")]:
        response = client.request(method, path)
        assert response.status_code == 401
        assert response.json()["error"] == "not_authenticated"


@pytest.mark.parametrize("url", ["http://xn--/hook", "https://xn--ls8h.xn--/x", "http://xn--zz.example.com/"])
def test_a_webhook_host_that_is_not_a_valid_idna_name_is_400_not_500(
    client: TestClient, api_user: ApiUser, db: Session, url: str
) -> None:
    hook = {"kind": "webhook", "config": {"url": url}}
    created = client.post("/v1/watches", json={"name": "W", "actions": [hook]}, headers=api_user.headers)
    assert created.status_code == 400, created.text
    assert "actions[0].config.url" in created.json()["detail"]
    watch = make_watch(client, api_user.headers, [], [LOG])
    for method, path, body in [
        ("POST", f"/v1/watches/{watch['id']}/actions", hook),
        ("PUT", f"/v1/actions/{watch['actions'][0]['id']}", hook),
    ]:
        response = client.request(method, path, json=body, headers=api_user.headers)
        assert response.status_code == 400, (method, response.text)
        assert "config.url" in response.json()["detail"]
    assert count_rows(db, WatchAction) == 1


@pytest.mark.parametrize(
    ("headers", "name"),
    [
        ({"X-Name": "caf\u00e9"}, "X-Name"),
        ({"X-Snow": "\u2603"}, "X-Snow"),
        ({"Authorization": "Bearer token "}, "Authorization"),
        ({"Authorization": " Bearer token"}, "Authorization"),
        ({"X-Ctl": "a\u0001b"}, "X-Ctl"),
        ({"X-Del": "a\u007fb"}, "X-Del"),
        ({"Content-Length": "5"}, "Content-Length"),
        ({"transfer-encoding": "chunked"}, "transfer-encoding"),
    ],
)
def test_header_values_that_cannot_be_sent_verbatim_are_refused(
    client: TestClient, api_user: ApiUser, db: Session, headers: dict[str, str], name: str
) -> None:
    """Headers are sent verbatim: a value HTTP cannot carry as given (not visible ASCII, spaces around
    it, control characters) or a header that would contradict the body's framing would fail every
    delivery, so the write refuses it instead of storing it."""
    hook = {"kind": "webhook", "config": {"url": "https://hooks.example.com/x", "headers": headers}}
    created = client.post("/v1/watches", json={"name": "W", "actions": [hook]}, headers=api_user.headers)
    assert created.status_code == 400, created.text
    assert set(created.json()["detail"]) == {"actions[0].config.headers"}, created.json()
    assert count_rows(db, Watch) == 0
    # Tabs inside, an empty value and visible ASCII are fine.
    fine = {"X-Tab": "a\tb", "X-Empty": "", "X-Sig": "sha256=abc/+~!"}
    ok = {"kind": "webhook", "config": {"url": "https://hooks.example.com/x", "headers": fine}}
    assert client.post(
        "/v1/watches", json={"name": "W", "actions": [ok]}, headers=api_user.headers
    ).is_success


def test_adding_an_action_past_the_chain_limit_is_refused(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    """A watch holds at most 50 actions, whichever route adds them (docs/compatibility.md)."""
    watch = make_watch(client, api_user.headers, [], [LOG] * 50)
    assert len(watch["actions"]) == 50
    for dry in ("", "?dry_run=1"):
        added = client.post(f"/v1/watches/{watch['id']}/actions{dry}", json=LOG, headers=api_user.headers)
        assert added.status_code == 400, added.text
        assert added.json()["error"] == "validation_error"
        assert "50 actions" in added.json()["detail"]["body"][0], added.json()
    assert count_rows(db, WatchAction) == 50
    # Moving one within a full chain is still an edit, not an addition.
    last = watch["actions"][-1]["id"]
    moved = client.put(f"/v1/actions/{last}", json={**LOG, "rank": 0}, headers=api_user.headers)
    assert moved.status_code == 200 and moved.json()["action"]["rank"] == 0
