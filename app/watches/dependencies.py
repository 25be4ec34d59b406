"""What the watch routes take from the app: its engines, and the rules an action's config is checked by."""

from __future__ import annotations

from fastapi import Request

from app.state import app_state
from app.watches import chain_service
from app.watches.engines.registry import Engines


def request_engines(request: Request) -> Engines:
    """The app's engines, made on first use (a probe of the endpoint is cached for a few seconds)."""
    state = app_state(request)
    engines = state.engines
    if engines is None:
        engines = state.engines = Engines(state.settings)
    return engines


def action_rules(request: Request) -> chain_service.ActionRules:
    return chain_service.ActionRules(
        allow_private=bool(app_state(request).settings.outbound_allow_private),
        engine_problem=request_engines(request).setup_problem,
    )
