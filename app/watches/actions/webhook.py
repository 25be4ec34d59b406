"""webhook: the item (instant) or a window of items (digest) sent to the configured URL with the
configured method and headers, in the body docs/compatibility.md gives. Each call is a delivery,
written `pending` before the call (so a crash leaves a trace) and settled by the answer as
`app/kit/webhook_call.py` judges it: `succeeded` (the runs succeed), `errored` (so are the runs:
retrying would change nothing) or `failed` (the runs are retried, each retry a new delivery row).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

from app.kit.ids import new_ulid
from app.kit.safe_http import literal_host_problem
from app.kit.webhook_call import call_webhook
from app.models import ActionKind, DeliveryState, RunState
from app.watches.actions.base import (
    Action,
    ActionContext,
    ActionRules,
    Performed,
    Prepared,
    payload,
    payload_items,
)
from app.watches.run_queue import ClaimedRun, DeliveryOutcome, Outcome
from app.watches.secrets import masked_config, restore_secrets, scrub_secrets, target_host
from app.watches.specs import WebhookConfig
from app.watches.summaries import cadence_phrase, fields_phrase


def prepare(runs: list[ClaimedRun], now: datetime) -> Prepared:
    """The body and the pending delivery row for these runs (one run, or a digest window's); runs
    whose item cannot be read are `errored` and left out."""
    config = runs[0].config
    found = payload_items(runs)
    errored, good = found.errored, found.runs
    if not good:
        return Prepared([], errored)
    body = payload(good, found.items)
    first = good[0]
    row = {
        "id": new_ulid(),
        "account_id": first.account_id,
        "watch_id": first.watch_id,
        "action_id": first.action_id,
        "delivery": body["delivery"],
        "method": str(config.get("method") or "POST"),
        "state": DeliveryState.PENDING,
        "attempt": max(run.attempt for run in good),
        "item_count": len(good),
        "http_status": None,
        "target_host": target_host(str(config.get("url", ""))),
        "error": "",
        "request_payload": body,
        "created_at": now,
        "started_at": now,
        "completed_at": None,
    }
    return Prepared(good, errored, row, body)


async def send(
    ctx: ActionContext, prepared: Prepared, clock: Callable[[], datetime]
) -> tuple[list[Outcome], DeliveryOutcome]:
    if prepared.row is None:
        raise ValueError("a webhook call without its delivery row (see prepare)")
    config = prepared.runs[0].config
    headers = {"Content-Type": "application/json", **dict(config.get("headers") or {})}
    call = await call_webhook(
        ctx.webhook_http,
        str(config.get("method") or "POST"),
        str(config["url"]),
        headers=headers,
        content=orjson.dumps(prepared.body),
        timeout=ctx.settings.webhook_timeout,
        max_response_bytes=ctx.settings.webhook_max_response_bytes,
    )
    state, status = DeliveryState(call.state), call.http_status
    # Some exceptions name the URL whole or echo a header: the text is shown by the API, so the
    # secrets are hidden as everywhere else in responses.
    error = scrub_secrets(call.error, config)
    delivery = DeliveryOutcome(prepared.row["id"], state, status, error, clock())
    result = {"http_status": status} if state == DeliveryState.SUCCEEDED else None
    outcomes = [
        # A run ends as its delivery did (succeeded, failed: retried, errored).
        Outcome(run, RunState(state), result=result, error=error, delivery_id=prepared.row["id"])
        for run in prepared.runs
    ]
    return outcomes, delivery


class WebhookAction(Action):
    kind = ActionKind.WEBHOOK
    config_model = WebhookConfig

    def describe(self, config: dict[str, Any]) -> str:
        host = target_host(str(config.get("url", ""))) or "?"
        return f"{config.get('method', 'POST')} {fields_phrase(config)} to {host} ({cadence_phrase(config)})"

    def shown(self, config: dict[str, Any]) -> dict[str, Any]:
        return masked_config(config)

    def checked(
        self, config: dict[str, Any], prior: dict[str, Any] | None, rules: ActionRules
    ) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The masked URL and header values an edit sent back take the stored ones; a literal address
        that is not public is refused unless private destinations are allowed."""
        config, unresolved = restore_secrets(config, prior)
        if unresolved:
            left_masked = (
                "Left masked (***) with no stored value to keep (a header's stored value stays with its"
                " destination): send the real value."
            )
            return config, {name: [left_masked] for name in unresolved}
        problem = literal_host_problem(config["url"], allow_private=rules.allow_private)
        if problem is not None:
            return config, {"url": [f"The URL {problem}."]}
        return config, {}

    def prepare(self, runs: list[ClaimedRun], now: datetime) -> Prepared:
        return prepare(runs, now)

    async def perform(
        self, ctx: ActionContext, prepared: Prepared, clock: Callable[[], datetime]
    ) -> Performed:
        return await send(ctx, prepared, clock)
