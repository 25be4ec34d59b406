"""An action that needs an engine (semantic_filter, extract) is refused at write time, with what
GET /v1/engines says, when its engine cannot run on this server: none configured, or the optional local
engine not installed. Accepted, it would only fail every run."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import Settings
from app.models import Watch, WatchAction
from tests.conftest import ApiUser
from tests.factories import count_rows
from tests.watches.conftest import make_watch

FILTER = {"kind": "semantic_filter", "config": {"instructions": "Posts about Rust"}}
EXTRACT = {"kind": "extract", "config": {"fields": [{"name": "company", "description": "The company"}]}}
LOG = {"kind": "log", "config": {}}
LOCAL_FILTER = {"kind": "semantic_filter", "config": {"instructions": "Rust", "engine": {"kind": "local"}}}


def unconfigure(client: TestClient, settings: Settings) -> None:
    """The operator leaves TIDINGS_ENGINE_BASE_URL empty (the app's engines are made afresh)."""
    settings.engine_base_url = ""
    client.app.state.engines = None  # type: ignore[attr-defined]


def engines_say(client: TestClient, api_user: ApiUser, kind: str) -> str:
    """What GET /v1/engines says of `kind`: its reason and what to do, as the write's message."""
    found = {e["kind"]: e for e in client.get("/v1/engines", headers=api_user.headers).json()["items"]}
    assert found[kind]["available"] is False
    reason = found[kind]["unreachable_reason"].rstrip(".")
    return f"{reason}. {found[kind]['how_to_fix']}"


def refused(response: Any, field: str) -> list[str]:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "validation_error"
    messages: list[str] = body["detail"][field]
    return messages


@pytest.mark.parametrize("action", [FILTER, EXTRACT], ids=["semantic_filter", "extract"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_watch_with_an_engine_action_and_no_engine_is_refused(
    client: TestClient,
    api_user: ApiUser,
    settings: Settings,
    db: Session,
    action: dict[str, Any],
    dry_run: bool,
) -> None:
    unconfigure(client, settings)
    message = engines_say(client, api_user, "openai_compat")
    assert "TIDINGS_ENGINE_BASE_URL" in message
    created = client.post(
        "/v1/watches",
        json={"name": "W", "actions": [LOG, action]},
        params={"dry_run": "true"} if dry_run else {},
        headers=api_user.headers,
    )
    assert refused(created, "actions[1].config.engine") == [message]
    assert count_rows(db, Watch) == 0
    # A chain without an engine action needs none.
    assert make_watch(client, api_user.headers, [], [LOG])["actions"][0]["kind"] == "log"


def test_every_write_of_an_engine_action_is_refused_without_an_engine(
    client: TestClient, api_user: ApiUser, settings: Settings, db: Session
) -> None:
    unconfigure(client, settings)
    message = engines_say(client, api_user, "openai_compat")
    watch = make_watch(client, api_user.headers, [], [LOG])
    log_id = watch["actions"][0]["id"]
    headers = api_user.headers

    added = client.post(f"/v1/watches/{watch['id']}/actions", json=FILTER, headers=headers)
    assert refused(added, "config.engine") == [message]
    edited = client.put(f"/v1/actions/{log_id}", json=EXTRACT, headers=headers)
    assert refused(edited, "config.engine") == [message]
    replaced = client.put(
        f"/v1/watches/{watch['id']}",
        json={"name": "W", "actions": [{"id": log_id, **LOG}, FILTER]},
        headers=headers,
    )
    assert refused(replaced, "actions[1].config.engine") == [message]
    assert [a.kind for a in db.scalars(select(WatchAction))] == ["log"]


def test_the_local_engine_not_installed_is_refused_with_its_own_message(
    client: TestClient, api_user: ApiUser
) -> None:
    # The test settings name a model package that is not installed; openai_compat is configured.
    message = engines_say(client, api_user, "local")
    created = client.post(
        "/v1/watches", json={"name": "W", "actions": [LOCAL_FILTER]}, headers=api_user.headers
    )
    assert refused(created, "actions[0].config.engine") == [message]
    assert "tidings[local]" in message
    on_the_default = make_watch(client, api_user.headers, [], [FILTER, EXTRACT])
    assert [a["kind"] for a in on_the_default["actions"]] == ["semantic_filter", "extract"]


def test_turning_on_a_watch_whose_engine_went_away_is_refused(
    client: TestClient, api_user: ApiUser, settings: Settings, db: Session
) -> None:
    """A watch made while the engine was configured, paused; the operator then removes the engine.
    Switching it back on is refused (it would fail every run); renaming or pausing it is not."""
    watch = make_watch(client, api_user.headers, [], [LOG, FILTER], is_active=False)
    unconfigure(client, settings)
    message = engines_say(client, api_user, "openai_compat")
    path, headers = f"/v1/watches/{watch['id']}", api_user.headers

    assert refused(
        client.patch(path, json={"is_active": True}, headers=headers), "actions[1].config.engine"
    ) == [message]
    assert refused(client.put(path, json={"name": "W"}, headers=headers), "actions[1].config.engine") == [
        message
    ]
    assert client.patch(path, json={"name": "Renamed"}, headers=headers).status_code == 200
    assert client.put(path, json={"name": "W", "is_active": False}, headers=headers).status_code == 200
    db.expire_all()
    assert db.get_one(Watch, watch["id"]).is_active is False
    # Dropping the filter from the chain is the other way out, in the same write that turns it on.
    kept = client.put(
        path, json={"name": "W", "actions": [{"id": watch["actions"][0]["id"], **LOG}]}, headers=headers
    )
    assert kept.status_code == 200, kept.text
    assert kept.json()["is_active"] is True
