"""`board_feed` and `board_comment`: Hacker News through its Algolia search API (TIDINGS_HN_API_URL).

Both ask `search_by_date` (newest first) with `numericFilters=created_at_i>SINCE`, so live mode and
backfill are the same query with a different start; `tags` picks stories (`story`, `show_hn`,
`ask_hn`) or `comment`; `match=any` makes every word of the query optional (`optionalWords`). Pages
are followed until one is short, up to MAX_PAGES.
`field_map` keys: any of the payload's string fields (`title`, `url`, `external_url`, `content`,
`author`, ...) named to the hit's key to read instead (`{"title": "story_title"}`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from app.feeds.connectors.base import (
    MAX_ITEMS_PER_POLL,
    ConnectorError,
    FetchContext,
    Fetched,
    Observation,
    SourceJob,
    apply_field_map,
    clean_text,
    fetch,
    html_to_text,
    judge_status,
    payload,
    utc_from_timestamp,
)

HITS_PER_PAGE = 100
MAX_PAGES = MAX_ITEMS_PER_POLL // HITS_PER_PAGE
ITEM_URL = "https://news.ycombinator.com/item?id="
STORY_TAGS = {"new": "story", "show": "show_hn", "ask": "ask_hn"}


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def hit_observation(
    kind: str, spec: Mapping[str, Any], hit: Mapping[str, Any], field_map: Mapping[str, str]
) -> Observation | None:
    object_id = clean_text(hit.get("objectID"), 100)
    occurred_at = utc_from_timestamp(hit.get("created_at_i"))
    if not object_id or occurred_at is None:
        return None
    author = clean_text(hit.get("author"), 200)
    if kind == "board_feed":
        data = payload(
            "board_feed",
            "board_feed",
            object_id,
            occurred_at,
            title=clean_text(hit.get("title")),
            content=html_to_text(str(hit.get("story_text") or "")),
            url=ITEM_URL + object_id,
            external_url=clean_text(hit.get("url"), 2048),
            author=author,
            feed=str(spec.get("feed", "new")),
            num_comments=_int(hit.get("num_comments")),
            points=_int(hit.get("points")),
        )
    else:
        story_title = clean_text(hit.get("story_title"))
        story_id = hit.get("story_id")
        data = payload(
            "board_comment",
            "board_comment",
            object_id,
            occurred_at,
            # For a comment, the title is its story's headline and the parent is the root story.
            title=story_title,
            content=html_to_text(str(hit.get("comment_text") or "")),
            parent_external_id=str(story_id) if story_id is not None else "",
            url=ITEM_URL + object_id,
            external_url=clean_text(hit.get("story_url"), 2048),
            author=author,
            feed="comments",
            story_title=story_title,
        )
    apply_field_map(data, hit, field_map, content={"content"})
    return Observation(object_id, occurred_at, data)


def parse_page(body: bytes) -> tuple[list[Mapping[str, Any]], int]:
    """A search page's hits and its number of pages; ConnectorError for anything else."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ConnectorError("the search API answered something that is not JSON") from exc
    hits = document.get("hits") if isinstance(document, dict) else None
    if not isinstance(hits, list):
        raise ConnectorError("the search API's answer has no list of hits")
    return [hit for hit in hits if isinstance(hit, dict)], _int(document.get("nbPages"))


class BoardConnector:
    """Hacker News stories (`board_feed`) or comments (`board_comment`)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def params(self, spec: Mapping[str, Any], since_epoch: int) -> dict[str, str | int]:
        tags = (
            STORY_TAGS.get(str(spec.get("feed", "new")), "story") if self.kind == "board_feed" else "comment"
        )
        params: dict[str, str | int] = {
            "tags": tags,
            "numericFilters": f"created_at_i>{since_epoch}",
            "hitsPerPage": HITS_PER_PAGE,
        }
        query = str(spec.get("query") or "").strip()
        if query:
            params["query"] = query
            if spec.get("match") == "any":
                params["optionalWords"] = query
        return params

    async def fetch(self, job: SourceJob, ctx: FetchContext) -> Fetched:
        url = ctx.settings.hn_api_url.rstrip("/") + "/search_by_date"
        params = self.params(job.spec, int(job.since.timestamp()))
        seen: dict[str, Observation] = {}
        for page in range(MAX_PAGES):
            response = await fetch(ctx, url, params={**params, "page": page})
            judge_status(response)
            hits, pages = await ctx.run_cpu(parse_page, response.content)
            for hit in hits:
                observation = hit_observation(self.kind, job.spec, hit, job.field_map)
                if (
                    observation is not None
                    and observation.occurred_at is not None
                    and observation.occurred_at > job.since
                ):
                    seen.setdefault(observation.external_id, observation)
            if len(hits) < HITS_PER_PAGE or page + 1 >= pages:
                break
        observations = sorted(seen.values(), key=lambda o: (o.occurred_at, o.external_id))
        return Fetched(observations=observations)
