"""extract: an engine fills the declared fields from the item (and its linked article, when fetched).
The run always succeeds once the engine answered; `status` says how many fields it could fill."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

from app.models import ActionKind, RunState
from app.watches.actions.base import Action, ActionContext, Performed, Prepared, item_data, item_text
from app.watches.engines.base import EngineError
from app.watches.enrichment import fetch_article
from app.watches.run_queue import ClaimedRun, Outcome
from app.watches.specs import ExtractConfig
from app.watches.summaries import engine_phrase

MAX_VALUE = 4000


def as_text(value: Any) -> str:
    """A field's value as the text stored (empty: not filled)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()[:MAX_VALUE]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return orjson.dumps(value).decode()[:MAX_VALUE]


async def perform(ctx: ActionContext, run: ClaimedRun) -> Outcome:
    config = run.config
    fields = [{"name": str(f["name"]), "description": str(f["description"])} for f in config["fields"]]
    enrichment, article = await fetch_article(
        ctx.enrich_http, item_data(run), wanted=bool(config.get("fetch_external_content", True))
    )
    engine_spec = config.get("engine") or {}
    try:
        engine = ctx.engines.get(str(engine_spec.get("kind") or ""))
        found = await engine.extract(
            item_text(run, article),
            fields,
            str(config.get("instructions") or ""),
            str(engine_spec.get("model") or ""),
        )
    except EngineError as exc:
        return Outcome(run, RunState.FAILED, error=str(exc))
    extracted = {}
    for field in fields:
        text = as_text(found.get(field["name"]))
        if text:
            extracted[field["name"]] = text
    status = "complete" if len(extracted) == len(fields) else "partial" if extracted else "empty"
    result = {"extracted": extracted, "status": status, "enrichment_status": enrichment}
    return Outcome(run, RunState.SUCCEEDED, result=result)


class ExtractAction(Action):
    kind = ActionKind.EXTRACT
    config_model = ExtractConfig
    uses_engine = True

    def describe(self, config: dict[str, Any]) -> str:
        names = [str(f.get("name", "")) for f in config.get("fields") or []]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        plural = "s" if len(names) != 1 else ""
        return f"extracts {len(names)} field{plural}: {shown} ({engine_phrase(config)})"

    async def perform(
        self, ctx: ActionContext, prepared: Prepared, clock: Callable[[], datetime]
    ) -> Performed:
        return [await perform(ctx, run) for run in prepared.runs], None
