"""webhook: the item (instant) or a window of items (digest) sent to the configured URL with the
configured method and headers, in the body docs/compatibility.md gives. Each call is a delivery,
written `pending` before the call (so a crash leaves a trace) and settled by the answer as
`app/kit/webhook_call.py` judges it: `succeeded` (the runs succeed), `errored` (so are the runs:
retrying would change nothing) or `failed` (the runs are retried, each retry a new delivery row).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from app.kit.ids import new_ulid
from app.kit.webhook_call import call_webhook
from app.watches.actions.base import ActionContext, payload, payload_items
from app.watches.run_queue import ClaimedRun, DeliveryOutcome, Outcome
from app.watches.secrets import scrub_secrets, target_host


@dataclass(slots=True)
class PreparedDelivery:
    runs: list[ClaimedRun]
    body: dict[str, Any]
    row: dict[str, Any]


def prepare(runs: list[ClaimedRun], now: datetime) -> tuple[PreparedDelivery | None, list[Outcome]]:
    """The body and the pending delivery row for these runs (one run, or a digest window's); runs
    whose item cannot be read are `errored` and left out."""
    config = runs[0].config
    found = payload_items(runs)
    errored, good = found.errored, found.runs
    if not good:
        return None, errored
    body = payload(good, found.items)
    first = good[0]
    row = {
        "id": new_ulid(),
        "account_id": first.account_id,
        "watch_id": first.watch_id,
        "action_id": first.action_id,
        "delivery": body["delivery"],
        "method": str(config.get("method") or "POST"),
        "state": "pending",
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
    return PreparedDelivery(good, body, row), errored


async def send(
    ctx: ActionContext, prepared: PreparedDelivery, clock: Any
) -> tuple[list[Outcome], DeliveryOutcome]:
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
    state, status = call.state, call.http_status
    # Some exceptions name the URL whole or echo a header: the text is shown by the API, so the
    # secrets are hidden as everywhere else in responses.
    error = scrub_secrets(call.error, config)
    delivery = DeliveryOutcome(prepared.row["id"], state, status, error, clock())
    result = {"http_status": status} if state == "succeeded" else None
    outcomes = [
        Outcome(run, state, result=result, error=error, delivery_id=prepared.row["id"])
        for run in prepared.runs
    ]
    return outcomes, delivery
