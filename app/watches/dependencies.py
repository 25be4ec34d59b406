"""What the watch routes take from the app: its engines, and the rules an action's config is checked by
(with the email API's desk for the `email` kind). The request's forms read the app's state; the
console's pages pass that state itself."""

from __future__ import annotations

from fastapi import Request
from sqlalchemy.orm import Session

from app.app_state import AppState, app_state
from app.identity.principal import Principal
from app.watches.actions.base import ActionRules
from app.watches.engines.registry import Engines


def engines_of(state: AppState) -> Engines:
    """The app's engines, made on first use (a probe of the endpoint is cached for a few seconds)."""
    engines = state.engines
    if engines is None:
        engines = state.engines = Engines(state.settings)
    return engines


def request_engines(request: Request) -> Engines:
    return engines_of(app_state(request))


def rules_of(state: AppState, session: Session, principal: Principal) -> ActionRules:
    """The rules for this account; the email API's side of the `email` kind is the desk the app was
    given (app/kit/newsletters.py), asked in the caller's own transaction."""
    desk = state.newsletters
    account_id = principal.account.id
    return ActionRules(
        allow_private=bool(state.settings.outbound_allow_private),
        engine_problem=engines_of(state).setup_problem,
        newsletter_problems=lambda list_ids: desk.problems(session, account_id, list_ids),
    )


def action_rules(request: Request, session: Session, principal: Principal) -> ActionRules:
    return rules_of(app_state(request), session, principal)
