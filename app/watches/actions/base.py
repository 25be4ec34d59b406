"""What the actions share: the interface every kind implements (`Action`, registered in ACTIONS in
`__init__.py`), the context a drain hands them, and the item text and payload builders."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel

from app.config import Settings
from app.kit.newsletters import Newsletter, Published
from app.kit.safe_http import SafeHttp
from app.kit.time import iso
from app.models import ActionKind, RunState
from app.watches.engines.base import ItemText, SetupProblem
from app.watches.engines.registry import Engines
from app.watches.run_queue import ClaimedRun, DeliveryOutcome, Outcome

log = logging.getLogger("tidings.watches")


@dataclass(frozen=True, slots=True)
class ActionRules:
    """What checking an action needs from the server and the account: whether webhooks may reach
    private addresses, why an engine kind (empty: the default) cannot run here, if it cannot, and what
    keeps the account from emailing lists of the email API (by config field; empty when nothing does)."""

    allow_private: bool
    engine_problem: Callable[[str], SetupProblem | None]
    newsletter_problems: Callable[[list[int]], dict[str, list[str]]]


@dataclass(frozen=True, slots=True)
class ActionContext:
    settings: Settings
    engines: Engines
    # Webhook calls: user-given destinations, so private addresses only when the settings allow.
    webhook_http: SafeHttp
    # Linked articles (enrichment): the same rules as any other user-given URL.
    enrich_http: SafeHttp
    # The email API's campaigns, in a transaction of their own (the scheduler wires the email domain's
    # desk in, app/kit/newsletters.py); None where no email domain is wired (the `email` kind errors).
    publish: Callable[[Newsletter], Awaitable[Published]] | None = None


@dataclass(slots=True)
class Prepared:
    """A group of claimed runs (one run, or a digest window's) made ready to perform, without I/O: the
    runs to perform, `errored` outcomes for those that cannot be (their item is unreadable), and for an
    action that calls out, the delivery row the drain writes `pending` before the call and the body the
    call sends (see webhook.py)."""

    runs: list[ClaimedRun]
    errored: list[Outcome] = field(default_factory=list)
    row: dict[str, Any] | None = None
    body: dict[str, Any] | None = None


# What performing a group did: its runs' outcomes, and the delivery's when a call was made.
Performed = tuple[list[Outcome], DeliveryOutcome | None]


class Action:
    """One action kind. The defaults fit a kind without secrets, engine or outbound call; a kind
    overrides what it needs. The drain calls `prepare` then `perform`; the chain service validates with
    `config_model` and `checked`; responses show `shown(config)` and `describe(config)`."""

    kind: ClassVar[ActionKind]
    # The config as clients send it (app/watches/specs.py); stored as it validates (model_dump).
    config_model: ClassVar[type[BaseModel]]
    # Whether the config names an engine (`engine`: EngineSpec) that must be able to run here.
    uses_engine: ClassVar[bool] = False

    def describe(self, config: dict[str, Any]) -> str:
        """`summary.detail`: one line a person can read, never showing a secret."""
        raise NotImplementedError

    def shown(self, config: dict[str, Any]) -> dict[str, Any]:
        """The stored config as responses show it."""
        return config

    def checked(
        self, config: dict[str, Any], prior: dict[str, Any] | None, rules: ActionRules
    ) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """A validated config as it will be stored, given the same action's stored config (`prior`, on an
        edit), and the rules it breaks that need more than its model: messages by field name."""
        return config, {}

    def prepare(self, runs: list[ClaimedRun], now: datetime) -> Prepared:
        return Prepared(runs)

    async def perform(
        self, ctx: ActionContext, prepared: Prepared, clock: Callable[[], datetime]
    ) -> Performed:
        raise NotImplementedError


class Unreadable(Exception):
    """The run's stored item is gone or cannot be read back: a permanent defect (`errored`)."""


def item_data(run: ClaimedRun) -> dict[str, Any]:
    if run.item is None:
        raise Unreadable("the feed item is gone (pruned by retention, or its feed was deleted)")
    if not isinstance(run.item.data, dict):
        raise Unreadable("the feed item's stored data cannot be read back")
    return run.item.data


def item_text(run: ClaimedRun, article: str = "") -> ItemText:
    data = item_data(run)
    return ItemText(
        source=run.item.source_label if run.item is not None else "",
        title=str(data.get("title") or ""),
        content=str(data.get("content") or ""),
        url=str(data.get("external_url") or data.get("url") or ""),
        article=article,
    )


def payload_item(run: ClaimedRun, include_fields: list[str]) -> dict[str, Any]:
    """One item of a webhook body or log line: its key, its source, and its fields (all, or those
    named by include_fields)."""
    data = item_data(run)
    item = run.item
    if item is None:  # item_data raised already; this says so to the type checker
        raise Unreadable("the feed item is gone")
    fields = data if not include_fields else {name: data[name] for name in include_fields if name in data}
    return {
        "key": f"{item.source_kind}:{item.external_id}",
        "source": {"label": item.source_label, "kind": item.source_kind},
        "item": fields,
    }


@dataclass(slots=True)
class PayloadItems:
    """The runs whose items could be read, their payload items in the same order, and an `errored`
    outcome for each run whose item could not."""

    runs: list[ClaimedRun]
    items: list[dict[str, Any]]
    errored: list[Outcome]


def payload_items(runs: list[ClaimedRun]) -> PayloadItems:
    """The payload items of a log line or webhook body (one run, or a digest window's runs)."""
    include = list(runs[0].config.get("include_fields") or [])
    found = PayloadItems([], [], [])
    for run in runs:
        try:
            found.items.append(payload_item(run, include))
        except Unreadable as exc:
            found.errored.append(Outcome(run, RunState.ERRORED, error=str(exc)))
            continue
        found.runs.append(run)
    return found


def payload(runs: list[ClaimedRun], items: list[dict[str, Any]]) -> dict[str, Any]:
    """The body of a webhook request (and of a log line): the shape docs/compatibility.md gives,
    `window` null for an instant delivery and the window's bounds for a digest."""
    first = runs[0]
    window = None
    if first.window is not None:
        window = {"since": iso(first.window[0]), "until": iso(first.window[1])}
    return {
        "watch": {"id": first.watch_id, "name": first.watch_name},
        "action_id": first.action_id,
        "delivery": "digest" if first.window is not None else "instant",
        "window": window,
        "items": items,
    }
