"""The app's typed state (app/app_state.py): `app_state()` and `SettingsDep` read what create_app set, and a
test that replaces a piece of the state is seen by both."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from app.app_state import AppState, SettingsDep, app_state
from app.config import Settings
from app.identity.token_lookup import CachedTokenLookup


def test_create_app_fills_the_typed_state(app: FastAPI, settings: Settings) -> None:
    state = app.state
    assert isinstance(state, AppState)
    assert state.settings is settings
    assert isinstance(state.token_lookup, CachedTokenLookup)
    assert state.engines is None
    # The tests' app reads and writes through the one session factory it was given.
    assert state.read_session_factory is state.write_session_factory
    assert state.reads_autocommit is False


def test_settings_dep_and_app_state_read_the_current_settings(app: FastAPI, settings: Settings) -> None:
    @app.get("/_test/settings")
    def read_settings(request: Request, given: SettingsDep) -> dict[str, Any]:
        return {"dep": given.base_url, "state": app_state(request).settings.base_url}

    with TestClient(app) as client:
        assert client.get("/_test/settings").json() == {"dep": settings.base_url, "state": settings.base_url}
        app.state.settings = settings.model_copy(update={"base_url": "https://elsewhere.example"})
        changed = client.get("/_test/settings").json()
    assert changed == {"dep": "https://elsewhere.example", "state": "https://elsewhere.example"}
