"""The action kinds' registry: one entry per `ActionKind`, each named by its own kind, with the config
model the OpenAPI document shows for it."""

from __future__ import annotations

from app.models import ActionKind
from app.openapi_docs import ACTION_CONFIGS
from app.watches.actions import ACTIONS


def test_every_action_kind_has_one_registered_action() -> None:
    assert list(ACTIONS) == list(ActionKind)
    for kind, action in ACTIONS.items():
        assert action.kind is kind


def test_each_kind_validates_with_the_config_the_documents_show() -> None:
    documented = set(ACTION_CONFIGS)
    assert {action.config_model for action in ACTIONS.values()} == documented


def test_only_the_engine_kinds_name_an_engine() -> None:
    engines = {kind for kind, action in ACTIONS.items() if action.uses_engine}
    assert engines == {ActionKind.SEMANTIC_FILTER, ActionKind.EXTRACT}
    for kind in engines:
        assert "engine" in ACTIONS[kind].config_model.model_fields
