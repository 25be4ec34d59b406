"""What /v1 answers about watches: the wire schemas (openmagpie's names) and the builders that fill
them from rows. Webhook secrets are masked here, on the way out, and nowhere else."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from app.kit.json_types import JsonObject
from app.kit.v1_wire import Timestamp, row_fields
from app.kit.wire_enum import inline_enum
from app.models import (
    ActionBackfill,
    DeliveryState,
    RunState,
    Watch,
    WatchAction,
    WatchActionDelivery,
    WatchActionRun,
)
from app.watches.actions import ACTIONS

if TYPE_CHECKING:
    RunStateField = RunState
    DeliveryStateField = DeliveryState
else:  # documented inline (app/kit/wire_enum.py)
    RunStateField = inline_enum(RunState)
    DeliveryStateField = inline_enum(DeliveryState)
EnrichmentStatus = Literal["not_applicable", "disabled", "included", "unavailable", "missing"]
Window = Literal["24h", "yesterday", "7d", "30d"]
DeliveryMode = Literal["instant", "digest"]
DeliveryMethod = Literal["POST", "PUT", "PATCH"]


class ActionSummary(BaseModel):
    detail: str = ""


class WatchActionWire(BaseModel):
    id: str
    kind: str
    rank: int
    config: JsonObject | None = None
    summary: ActionSummary = ActionSummary()
    created_at: Timestamp | None = None


class WatchWire(BaseModel):
    id: str
    name: str
    is_active: bool
    feed_ids: list[str] = []
    user_id: str
    created_at: Timestamp | None = None


class WatchView(WatchWire):
    actions: list[WatchActionWire] = []


class WatchMutationResponse(WatchView):
    id: str | None = None  # type: ignore[assignment]
    dry_run: bool


class WatchListResponse(BaseModel):
    items: list[WatchWire]
    next_cursor: str | None


class WatchActionMutationResponse(BaseModel):
    action: WatchActionWire
    dry_run: bool


class WatchActionListResponse(BaseModel):
    items: list[WatchActionWire]


class SemanticFilterResult(BaseModel):
    passed: bool
    score: float
    reason: str = ""
    enrichment_status: EnrichmentStatus = "not_applicable"


class ExtractResult(BaseModel):
    extracted: dict[str, str] = {}
    status: Literal["complete", "partial", "empty"] = "empty"
    enrichment_status: EnrichmentStatus = "not_applicable"


class LogResult(BaseModel):
    rendered: str = ""


class WebhookResult(BaseModel):
    http_status: int


class WatchActionRunWire(BaseModel):
    id: str
    watch_id: str
    action_id: str
    feed_item_id: str
    kind: str
    state: RunStateField
    error: str = ""
    result: SemanticFilterResult | ExtractResult | LogResult | WebhookResult | None = None
    # Beyond openmagpie's fields: how many attempts have started (at most 3).
    attempts: int = 0
    created_at: Timestamp | None = None
    scheduled_at: Timestamp | None = None
    started_at: Timestamp | None = None
    completed_at: Timestamp | None = None


class RunFeedItem(BaseModel):
    feed_id: str
    title: str = ""
    url: str = ""
    external_url: str = ""
    source_label: str = ""
    occurred_at: Timestamp | None = None


class RunFeed(BaseModel):
    id: str
    name: str = ""


class WatchActionRunSummary(BaseModel):
    window: Window = "7d"
    since: Timestamp
    until: Timestamp | None = None
    evaluated: dict[str, int] = {}
    pending: int = 0
    running: int = 0
    retrying: int = 0


class WatchActionRunListResponse(BaseModel):
    items: list[WatchActionRunWire]
    next_cursor: str | None
    action: WatchActionWire | None = None
    feeds: dict[str, RunFeed] = {}
    feed_items: dict[str, RunFeedItem] = {}
    summary: WatchActionRunSummary | None = None


class WatchActionRunView(BaseModel):
    run: WatchActionRunWire
    action: WatchActionWire | None = None
    feed: RunFeed | None = None
    feed_item: RunFeedItem | None = None


class WatchActionDeliveryWire(BaseModel):
    id: str
    watch_id: str
    action_id: str
    delivery: DeliveryMode
    method: DeliveryMethod
    state: DeliveryStateField
    attempt: int = 0
    item_count: int = 0
    http_status: int | None = None
    target_host: str = ""
    error: str = ""
    created_at: Timestamp | None = None
    started_at: Timestamp | None = None
    completed_at: Timestamp | None = None


class WatchActionDeliveryView(WatchActionDeliveryWire):
    request_payload: JsonObject = {}


class WatchActionDeliveryListResponse(BaseModel):
    items: list[WatchActionDeliveryWire]
    next_cursor: str | None


class EngineStatus(BaseModel):
    kind: str
    available: bool
    default_model: str = ""
    available_models: list[str] = []
    unreachable_reason: str | None = None
    how_to_fix: str | None = None


class EngineListResponse(BaseModel):
    items: list[EngineStatus]


class BackfillPreview(BaseModel):
    dry_run: bool
    source_action_id: str
    source_is_head: bool
    replace: bool
    matched: int
    present: int
    pruned: int
    would_delete: int
    would_enqueue: int


class BackfillJob(BaseModel):
    id: str
    state: str
    target_action_id: str
    source_action_id: str
    source_is_head: bool
    kind: str
    replace: bool
    occurred_since: Timestamp | None
    occurred_until: Timestamp | None
    completed_since: Timestamp | None
    completed_until: Timestamp | None
    matched: int
    present: int
    pruned: int
    deleted: int
    enqueued: int
    error: str
    created_at: Timestamp
    started_at: Timestamp | None
    completed_at: Timestamp | None


class BackfillListResponse(BaseModel):
    items: list[BackfillJob]
    next_cursor: str | None


# --- builders: rows to the models above ----------------------------------------------------------
# Built with `model_construct`: the values are the rows' own, and the stored JSON (an action's config, a
# run's result, a delivery's payload: JsonObject) goes out as it was stored, not re-read by the models.


def action_wire(action: WatchAction) -> WatchActionWire:
    kind = ACTIONS[action.kind]
    summary = ActionSummary.model_construct(detail=kind.describe(action.config))
    values = row_fields(WatchActionWire, action, config=kind.shown(action.config), summary=summary)
    return WatchActionWire.model_construct(**values)


def watch_wire(watch: Watch, feed_ids: list[str]) -> WatchWire:
    user_id = str(watch.user_id) if watch.user_id is not None else ""
    return WatchWire.model_construct(**row_fields(WatchWire, watch, feed_ids=feed_ids, user_id=user_id))


def watch_with_actions_wire(watch: Watch, feed_ids: list[str], actions: list[WatchAction]) -> WatchView:
    return WatchView.model_construct(
        **dict(watch_wire(watch, feed_ids)), actions=[action_wire(a) for a in actions]
    )


def run_wire(run: WatchActionRun) -> WatchActionRunWire:
    return WatchActionRunWire.model_construct(
        **row_fields(WatchActionRunWire, run, result=run.result or None)
    )


def delivery_wire(delivery: WatchActionDelivery) -> WatchActionDeliveryWire:
    return WatchActionDeliveryWire.model_construct(**row_fields(WatchActionDeliveryWire, delivery))


def delivery_with_payload_wire(delivery: WatchActionDelivery) -> WatchActionDeliveryView:
    return WatchActionDeliveryView.model_construct(
        **dict(delivery_wire(delivery)), request_payload=delivery.request_payload
    )


def job_wire(job: ActionBackfill) -> BackfillJob:
    """A backfill's record."""
    source_is_head = not job.source_action_id
    return BackfillJob.model_construct(**row_fields(BackfillJob, job, source_is_head=source_is_head))
