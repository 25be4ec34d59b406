"""Markup to plain text, for what a reader or a language model wants to see of a page or an item."""

from __future__ import annotations

import html
import re

# Stored text is bounded: an item is a pointer to an article, not an archive of it.
MAX_CONTENT = 20_000

_SCRIPT = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def html_to_text(value: str, limit: int = MAX_CONTENT) -> str:
    """Markup to plain text: scripts and styles dropped, tags removed, entities decoded, whitespace
    collapsed. What a reader or a language model wants to see. (One pass of each, in C where it can:
    this runs for every item of every poll.)"""
    if not value:
        return ""
    if "<" in value:
        if "script" in value or "style" in value or "SCRIPT" in value or "STYLE" in value:
            value = _SCRIPT.sub(" ", value)
        value = _TAG.sub(" ", value)
    if "&" in value:
        value = html.unescape(value)
    return " ".join(value.split())[:limit]
