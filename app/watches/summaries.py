"""`summary.detail`: one line a person can read about an action, built from its stored config (never
showing a webhook's secrets)."""

from __future__ import annotations

from typing import Any

from app.watches.secrets import target_host


def _engine(config: dict[str, Any]) -> str:
    engine = config.get("engine") or {}
    kind = engine.get("kind") or "default"
    model = engine.get("model") or ""
    return f"{kind} engine, model {model}" if model else f"{kind} engine"


def _cadence(config: dict[str, Any]) -> str:
    if config.get("delivery") == "digest":
        return f"digest every {config.get('digest_interval_seconds', 0)} s"
    return "instant"


def _fields(config: dict[str, Any]) -> str:
    include = config.get("include_fields") or []
    return "all fields" if not include else f"fields {', '.join(include)}"


def action_detail(kind: str, config: dict[str, Any]) -> str:
    if kind == "semantic_filter":
        fetch = ", with the linked article" if config.get("fetch_external_content", True) else ""
        return (
            f"passes items scoring at least {float(config.get('threshold', 0.8)):.2f} "
            f"({_engine(config)}{fetch})"
        )
    if kind == "extract":
        names = [str(f.get("name", "")) for f in config.get("fields") or []]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        return f"extracts {len(names)} field{'s' if len(names) != 1 else ''}: {shown} ({_engine(config)})"
    if kind == "log":
        return f"logs {_fields(config)} with prefix {config.get('prefix', '[watch]')} ({_cadence(config)})"
    if kind == "webhook":
        host = target_host(str(config.get("url", ""))) or "?"
        return f"{config.get('method', 'POST')} {_fields(config)} to {host} ({_cadence(config)})"
    return kind
