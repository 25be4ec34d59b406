"""Enrichment: the text of the article an item links to, fetched through the SSRF-safe client for an
engine to read. The article is never stored, and a run never fails for it: what happened is recorded
as the result's `enrichment_status`."""

from __future__ import annotations

import codecs
from typing import Any

from app.kit.safe_http import OutboundError, SafeHttp
from app.kit.text import html_to_text
from app.watches.engines.base import ARTICLE_TEXT_LIMIT

TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")


def _codec(name: str | None) -> str:
    """The page's declared charset when Python knows it, else UTF-8 (a bad label is no reason to
    lose the page)."""
    try:
        return codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        return "utf-8"


async def fetch_article(http: SafeHttp, data: Any, *, wanted: bool) -> tuple[str, str]:
    """(enrichment_status, text): `disabled` when the action does not fetch, `missing` when the item
    links nowhere off-site, `unavailable` when the page could not be had or held no text, `included`
    with the page's text otherwise."""
    if not wanted:
        return "disabled", ""
    url = str(data.get("external_url") or "") if isinstance(data, dict) else ""
    if not url.startswith(("http://", "https://")):
        return "missing", ""
    try:
        response = await http.get(url, headers={"Accept": "text/html, text/plain;q=0.9"})
    except OutboundError:
        return "unavailable", ""
    content_type = response.headers.get("content-type", "text/html").split(";")[0].strip().lower()
    if response.status_code != 200 or content_type not in TEXT_TYPES:
        return "unavailable", ""
    text = html_to_text(response.content.decode(_codec(response.header_charset()), "replace"))
    text = text[:ARTICLE_TEXT_LIMIT]
    return ("included", text) if text else ("unavailable", "")
