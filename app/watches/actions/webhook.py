"""webhook: the item (instant) or a window of items (digest) sent to the configured URL with the
configured method and headers, in the body docs/compatibility.md gives. Each call is a delivery,
written `pending` before the call (so a crash leaves a trace) and settled by the answer:

- 2xx: `succeeded`, and the runs succeed;
- a blocked destination, any redirect (never followed), another 4xx: `errored`, and so are the runs
  (retrying would change nothing);
- 5xx, 408, 429, a connection error, a timeout: `failed`; the runs are retried, each retry a new
  delivery row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from app.kit.ids import new_ulid
from app.kit.safe_http import (
    BlockedDestination,
    InvalidUrl,
    OutboundError,
    OutboundTimeout,
    ResponseTooLarge,
)
from app.models import DeliveryState, RunState
from app.watches.actions.base import ActionContext, payload, payload_items
from app.watches.run_queue import ClaimedRun, DeliveryOutcome, Outcome
from app.watches.secrets import scrub_secrets, target_host

RETRYABLE_STATUSES = (408, 429)


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
    return PreparedDelivery(good, body, row), errored


def judge(status: int) -> tuple[DeliveryState, str]:
    """The delivery state an HTTP status makes, and the error text it records."""
    if 200 <= status < 300:
        return DeliveryState.SUCCEEDED, ""
    if 300 <= status < 400:
        return (
            DeliveryState.ERRORED,
            f"the receiver answered a redirect (HTTP {status}); redirects are never followed",
        )
    if status >= 500 or status in RETRYABLE_STATUSES:
        return DeliveryState.FAILED, f"the receiver answered HTTP {status}"
    return DeliveryState.ERRORED, f"the receiver answered HTTP {status}"


async def send(
    ctx: ActionContext, prepared: PreparedDelivery, clock: Any
) -> tuple[list[Outcome], DeliveryOutcome]:
    config = prepared.runs[0].config
    headers = {"Content-Type": "application/json", **dict(config.get("headers") or {})}
    status: int | None = None
    note = ""
    try:
        response = await ctx.webhook_http.request(
            str(config.get("method") or "POST"),
            str(config["url"]),
            headers=headers,
            content=orjson.dumps(prepared.body),
            timeout=ctx.settings.webhook_timeout,
            max_bytes=ctx.settings.webhook_max_response_bytes,
        )
        status = response.status_code
        state, error = judge(status)
    except ResponseTooLarge as exc:
        # The receiver answered; only its answer's body was too long to read. Its status decides.
        status = exc.status_code
        cap = ctx.settings.webhook_max_response_bytes
        note = f"; the answer's body was larger than {cap} bytes and was not read"
        state, error = judge(status) if status is not None else (DeliveryState.FAILED, str(exc))
    except (BlockedDestination, InvalidUrl) as exc:
        state, error = DeliveryState.ERRORED, f"blocked destination: {exc}"
    except OutboundTimeout as exc:
        state, error = DeliveryState.FAILED, f"the receiver did not answer in time: {exc}"
    except OutboundError as exc:
        state, error = DeliveryState.FAILED, f"the call failed: {exc}"
    # Some exceptions name the URL whole or echo a header: the text is shown by the API, so the
    # secrets are hidden as everywhere else in responses.
    error = scrub_secrets((error + note).removeprefix("; "), config)
    delivery = DeliveryOutcome(prepared.row["id"], state, status, error, clock())
    result = {"http_status": status} if state == DeliveryState.SUCCEEDED else None
    outcomes = [
        # A run ends as its delivery did (succeeded, failed: retried, errored).
        Outcome(run, RunState(state), result=result, error=error, delivery_id=prepared.row["id"])
        for run in prepared.runs
    ]
    return outcomes, delivery
