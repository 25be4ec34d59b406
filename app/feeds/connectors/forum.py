"""`forum_community`: a Reddit community's newest posts (`/r/<community>/new.json` at TIDINGS_REDDIT_URL).

The listing is newest first and has no "since" filter: pages are followed (`after`) until a post at or
before the job's `since` shows up, up to MAX_PAGES. Requests say who they are (Reddit asks API clients
for a descriptive User-Agent, not a browser's) and obey the rate-limit headers: when
`X-Ratelimit-Remaining` runs out, no request goes to that host until `X-Ratelimit-Reset` has passed,
and a 429 waits for its Retry-After (or the reset).
`field_map` keys: any of the payload's string fields, named to the post's key to read instead.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import urlsplit

import orjson

from app.config import Settings
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
from app.kit.safe_http import SafeResponse

PAGE_SIZE = 100
MAX_PAGES = MAX_ITEMS_PER_POLL // PAGE_SIZE
# Requests left in the window below which the host is left alone until the window resets.
RESERVE = 1.0


def user_agent(settings: Settings) -> str:
    try:
        release = version("tidings")
    except PackageNotFoundError:
        release = "0"
    return f"python:tidings:{release} (self-hosted feed reader; +{settings.base_url})"


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def note_rate_limit(ctx: FetchContext, host: str, response: SafeResponse) -> float | None:
    """Record what the rate-limit headers say; returns the seconds to wait when the budget is spent."""
    remaining = _float(response.headers.get("x-ratelimit-remaining"))
    reset = _float(response.headers.get("x-ratelimit-reset"))
    if response.status_code == 429 or (remaining is not None and remaining < RESERVE):
        wait = reset if reset is not None else 60.0
        if response.status_code == 429:
            retry_after = _float(response.headers.get("retry-after"))
            wait = max(wait, retry_after or 0.0)
        ctx.rate_limits.block(host, time.monotonic() + wait)
        return wait
    return None


def post_observation(post: Mapping[str, Any], field_map: Mapping[str, str], site: str) -> Observation | None:
    post_id = clean_text(post.get("id"), 100)
    occurred_at = utc_from_timestamp(post.get("created_utc"))
    if not post_id or occurred_at is None:
        return None
    permalink = clean_text(post.get("permalink"), 2048)
    is_self = bool(post.get("is_self"))
    data = payload(
        "new_post",
        "forum_community",
        post_id,
        occurred_at,
        title=clean_text(post.get("title")),
        content=html_to_text(str(post.get("selftext") or "")),
        url=site + permalink if permalink.startswith("/") else permalink,
        external_url="" if is_self else clean_text(post.get("url"), 2048),
        author=clean_text(post.get("author"), 200),
        community=clean_text(post.get("subreddit"), 100),
        permalink=permalink,
    )
    apply_field_map(data, post, field_map, content={"content"})
    return Observation(post_id, occurred_at, data)


def parse_listing(body: bytes) -> tuple[list[Mapping[str, Any]], str | None]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ConnectorError("the listing is not JSON (a login wall or an error page?)") from exc
    data = document.get("data") if isinstance(document, dict) else None
    children = data.get("children") if isinstance(data, dict) else None
    if not isinstance(children, list):
        raise ConnectorError("the answer is not a listing of posts")
    posts = [
        child["data"] for child in children if isinstance(child, dict) and isinstance(child.get("data"), dict)
    ]
    after = data.get("after") if isinstance(data, dict) else None
    return posts, after if isinstance(after, str) and after else None


class ForumConnector:
    kind = "forum_community"

    async def fetch(self, job: SourceJob, ctx: FetchContext) -> Fetched:
        site = ctx.settings.reddit_url.rstrip("/")
        url = f"{site}/r/{job.spec['community']}/new.json"
        host = urlsplit(site).netloc
        headers = {"User-Agent": user_agent(ctx.settings), "Accept": "application/json"}
        seen: dict[str, Observation] = {}
        after: str | None = None
        for _ in range(MAX_PAGES):
            wait = ctx.rate_limits.wait_for(host, time.monotonic())
            if wait > 0 and seen:
                break  # what the earlier pages brought is kept; the rest waits for the next poll
            if wait > 0:
                raise ConnectorError(
                    f"the upstream's rate limit is spent; it resets in {wait:.0f} s", retry_after=wait
                )
            params: dict[str, str | int] = {"limit": PAGE_SIZE, "raw_json": 1}
            if after:
                params["after"] = after
            response = await fetch(ctx, url, params=params, headers=headers)
            wait_after = note_rate_limit(ctx, host, response)
            if response.status_code == 429:
                raise ConnectorError("HTTP 429: rate limited by the upstream", retry_after=wait_after)
            judge_status(response)
            posts, after = await ctx.run_cpu(parse_listing, response.content)
            caught_up = False
            for post in posts:
                observation = post_observation(post, job.field_map, site)
                if observation is None or observation.occurred_at is None:
                    continue
                if observation.occurred_at <= job.since:
                    # Newest first: everything after this one is older still.
                    caught_up = True
                    continue
                seen.setdefault(observation.external_id, observation)
            if caught_up or not after or not posts:
                break
        observations = sorted(seen.values(), key=lambda o: (o.occurred_at, o.external_id))
        return Fetched(observations=observations)
