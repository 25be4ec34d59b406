"""semantic_filter: an engine scores the item (with its linked article, when fetched) against the
instructions; at or above the threshold the run succeeds and the chain goes on, below it the run is
`gated` and the chain stops there (not a failure)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from app.models import ActionKind, RunState
from app.watches.actions.base import Action, ActionContext, Performed, Prepared, item_data, item_text
from app.watches.engines.base import EngineError
from app.watches.enrichment import fetch_article
from app.watches.run_queue import ClaimedRun, Outcome
from app.watches.specs import SemanticFilterConfig
from app.watches.summaries import engine_phrase


async def perform(ctx: ActionContext, run: ClaimedRun) -> Outcome:
    config = run.config
    enrichment, article = await fetch_article(
        ctx.enrich_http, item_data(run), wanted=bool(config.get("fetch_external_content", True))
    )
    engine_spec = config.get("engine") or {}
    try:
        engine = ctx.engines.get(str(engine_spec.get("kind") or ""))
        judgment = await engine.score(
            item_text(run, article), str(config["instructions"]), str(engine_spec.get("model") or "")
        )
    except EngineError as exc:
        return Outcome(run, RunState.FAILED, error=str(exc))
    passed = judgment.score >= float(config.get("threshold", 0.8))
    result = {
        "passed": passed,
        "score": judgment.score,
        "reason": judgment.reason,
        "enrichment_status": enrichment,
    }
    return Outcome(run, RunState.SUCCEEDED if passed else RunState.GATED, result=result)


class SemanticFilterAction(Action):
    kind = ActionKind.SEMANTIC_FILTER
    config_model = SemanticFilterConfig
    uses_engine = True

    def describe(self, config: dict[str, Any]) -> str:
        fetch = ", with the linked article" if config.get("fetch_external_content", True) else ""
        return (
            f"passes items scoring at least {float(config.get('threshold', 0.8)):.2f} "
            f"({engine_phrase(config)}{fetch})"
        )

    async def perform(
        self, ctx: ActionContext, prepared: Prepared, clock: Callable[[], datetime]
    ) -> Performed:
        return [await perform(ctx, run) for run in prepared.runs], None
