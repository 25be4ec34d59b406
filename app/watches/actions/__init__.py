"""The action kinds, each an `Action` (base.py): what it accepts as config, how responses show it, and
what it does with a claimed run (or, for a digest, a window of runs). Adding a kind is one entry here,
its member of `ActionKind` (app/models/states.py) and its config model (app/watches/specs.py)."""

from __future__ import annotations

from app.models import ActionKind
from app.watches.actions.base import Action
from app.watches.actions.email import EmailAction
from app.watches.actions.extract import ExtractAction
from app.watches.actions.log import LogAction
from app.watches.actions.semantic_filter import SemanticFilterAction
from app.watches.actions.webhook import WebhookAction

ACTIONS: dict[ActionKind, Action] = {
    ActionKind.SEMANTIC_FILTER: SemanticFilterAction(),
    ActionKind.EXTRACT: ExtractAction(),
    ActionKind.LOG: LogAction(),
    ActionKind.WEBHOOK: WebhookAction(),
    ActionKind.EMAIL: EmailAction(),
}
