"""The engines of one process, one per registered kind, and the default for an empty `engine.kind`."""

from __future__ import annotations

import asyncio
from typing import Any

from app.config import Settings
from app.watches.engines.base import Engine, EngineError, SetupProblem
from app.watches.engines.local import LocalEngine
from app.watches.engines.names import DEFAULT_ENGINE, ENGINE_KINDS
from app.watches.engines.openai_compat import OpenAICompatEngine


class Engines:
    def __init__(self, settings: Settings, engines: dict[str, Engine] | None = None) -> None:
        self.engines: dict[str, Engine] = engines or {
            "openai_compat": OpenAICompatEngine(settings),
            "local": LocalEngine(settings),
        }

    def get(self, kind: str) -> Engine:
        engine = self.engines.get(kind or DEFAULT_ENGINE)
        if engine is None:
            raise EngineError(f"no engine of kind {kind!r} is registered")
        return engine

    def setup_problem(self, kind: str) -> SetupProblem | None:
        """Why the engine `kind` names (empty: the default) cannot run here whatever its endpoint
        answers, or None; an unregistered kind is the specs' to refuse."""
        engine = self.engines.get(kind or DEFAULT_ENGINE)
        return engine.setup_problem() if engine is not None else None

    async def statuses(self) -> list[dict[str, Any]]:
        """EngineStatus of each registered kind, in registry order; never raises."""
        kinds = [kind for kind in ENGINE_KINDS if kind in self.engines]
        found = await asyncio.gather(*(self.engines[k].status() for k in kinds), return_exceptions=True)
        statuses = []
        for kind, status in zip(kinds, found, strict=True):
            if isinstance(status, BaseException):
                status = {
                    "kind": kind,
                    "default_model": "",
                    "available": False,
                    "available_models": [],
                    "unreachable_reason": f"checking the engine failed: {type(status).__name__}: {status}",
                    "how_to_fix": "See the server's log.",
                }
            statuses.append(status)
        return statuses

    async def aclose(self) -> None:
        for engine in self.engines.values():
            await engine.aclose()
