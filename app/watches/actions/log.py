"""log: one line on the server's log per item (instant) or per window (digest), the prefix then the
same JSON body a webhook would carry, flushed at once. A digest line may repeat after a crash
(at-least-once): a log line carries no key to deduplicate on."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson

from app.models import ActionKind, RunState
from app.watches.actions.base import Action, ActionContext, Performed, Prepared, payload, payload_items
from app.watches.run_queue import ClaimedRun, Outcome
from app.watches.specs import LogConfig
from app.watches.summaries import cadence_phrase, fields_phrase

watch_log = logging.getLogger("tidings.watches.log")
watch_log.setLevel(logging.INFO)
# What a run keeps of the line it wrote.
MAX_RENDERED = 10_000


def _flush(logger: logging.Logger) -> None:
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            handler.flush()
        current = current.parent if current.propagate else None


def perform(runs: list[ClaimedRun]) -> list[Outcome]:
    config = runs[0].config
    found = payload_items(runs)
    outcomes: list[Outcome] = found.errored
    good = found.runs
    if good:
        line = f"{config.get('prefix', '[watch]')} {orjson.dumps(payload(good, found.items)).decode()}"
        watch_log.info(line)
        _flush(watch_log)
        rendered = {"rendered": line[:MAX_RENDERED]}
        outcomes.extend(Outcome(run, RunState.SUCCEEDED, result=rendered) for run in good)
    return outcomes


class LogAction(Action):
    kind = ActionKind.LOG
    config_model = LogConfig

    def describe(self, config: dict[str, Any]) -> str:
        prefix = config.get("prefix", "[watch]")
        return f"logs {fields_phrase(config)} with prefix {prefix} ({cadence_phrase(config)})"

    async def perform(
        self, ctx: ActionContext, prepared: Prepared, clock: Callable[[], datetime]
    ) -> Performed:
        return perform(prepared.runs), None
