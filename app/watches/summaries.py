"""The phrases of `summary.detail` (one line a person can read about an action) that several kinds
share; each kind writes its line in its `describe` (app/watches/actions/)."""

from __future__ import annotations

from typing import Any


def engine_phrase(config: dict[str, Any]) -> str:
    engine = config.get("engine") or {}
    kind = engine.get("kind") or "default"
    model = engine.get("model") or ""
    return f"{kind} engine, model {model}" if model else f"{kind} engine"


def cadence_phrase(config: dict[str, Any]) -> str:
    if config.get("delivery") == "digest":
        return f"digest every {config.get('digest_interval_seconds', 0)} s"
    return "instant"


def fields_phrase(config: dict[str, Any]) -> str:
    include = config.get("include_fields") or []
    return "all fields" if not include else f"fields {', '.join(include)}"
