"""What the watch routes take from the app: its engines, and the rules an action's config is checked by
(with the email API's desk for the `email` kind)."""

from __future__ import annotations

from fastapi import Request
from sqlalchemy.orm import Session

from app.identity.principal import Principal
from app.state import app_state
from app.watches.actions.base import ActionRules
from app.watches.engines.registry import Engines


def request_engines(request: Request) -> Engines:
    """The app's engines, made on first use (a probe of the endpoint is cached for a few seconds)."""
    state = app_state(request)
    engines = state.engines
    if engines is None:
        engines = state.engines = Engines(state.settings)
    return engines


def action_rules(request: Request, session: Session, principal: Principal) -> ActionRules:
    """The rules for this request's account; the email API's side of the `email` kind is the desk the
    app was given (app/kit/newsletters.py), asked in the request's own transaction."""
    state = app_state(request)
    desk = state.newsletters
    account_id = principal.account.id
    return ActionRules(
        allow_private=bool(state.settings.outbound_allow_private),
        engine_problem=request_engines(request).setup_problem,
        newsletter_problems=lambda list_ids: desk.problems(session, account_id, list_ids),
    )
