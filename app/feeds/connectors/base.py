"""The one small interface every connector implements, and what connectors share: the job a poll
hands a connector, what it hands back, its errors, and the payload and text helpers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

from app.config import Settings
from app.kit.safe_http import OutboundError, SafeHttp, SafeResponse
from app.kit.text import html_to_text as html_to_text
from app.kit.time import iso

T = TypeVar("T")

# Stored text is bounded: an item is a pointer to an article, not an archive of it.
MAX_TITLE = 1000
MAX_CONTENT = 20_000
# One poll of one source yields at most this many items (a feed of 100,000 entries is a mistake).
MAX_ITEMS_PER_POLL = 1000


class ConnectorError(Exception):
    """A source could not be polled this time. `retry_after` (seconds) is the upstream's own word on
    when to come back (Retry-After, a rate-limit reset), if it said."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class SourceJob:
    """One source to poll, as the claim read it."""

    source_id: str
    kind: str
    spec: Mapping[str, Any]
    display: str
    # The feed's default_field_map overlaid by the source's own field_map.
    field_map: Mapping[str, str]
    meta: Mapping[str, str]
    # Items that occurred at or before this moment are not wanted (live start, backfill, retention).
    since: datetime
    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    external_id: str
    occurred_at: datetime | None
    data: dict[str, Any]


@dataclass(slots=True)
class Fetched:
    observations: list[Observation] = field(default_factory=list)
    etag: str | None = None
    last_modified: str | None = None
    not_modified: bool = False


class HostRateLimits:
    """Hosts that told us to wait (rate-limit headers), with the monotonic time they open again."""

    def __init__(self) -> None:
        self.blocked_until: dict[str, float] = {}

    def wait_for(self, host: str, now: float) -> float:
        until = self.blocked_until.get(host, 0.0)
        return max(0.0, until - now)

    def block(self, host: str, until: float) -> None:
        self.blocked_until[host] = max(self.blocked_until.get(host, 0.0), until)


class RequestGates:
    """How many requests may be in flight: in all, and to one host. Gates are taken around each
    request alone, so parsing one answer never holds a slot another request could use."""

    def __init__(self, total: int, per_host: int) -> None:
        self.total = asyncio.Semaphore(max(total, 1))
        self.per_host = max(per_host, 1)
        self.hosts: dict[str, asyncio.Semaphore] = {}

    @asynccontextmanager
    async def enter(self, url: str) -> AsyncIterator[None]:
        parts = urlsplit(url)
        host = f"{parts.hostname}:{parts.port or ''}"
        gate = self.hosts.get(host)
        if gate is None:
            gate = self.hosts[host] = asyncio.Semaphore(self.per_host)
        # The host first: a request queued behind a busy host holds none of the shared slots.
        async with gate, self.total:
            yield


@dataclass(slots=True)
class FetchContext:
    http: SafeHttp
    settings: Settings
    # Runs CPU-bound work (parsing) off the event loop.
    run_cpu: Callable[..., Awaitable[Any]]
    gates: RequestGates
    rate_limits: HostRateLimits = field(default_factory=HostRateLimits)


class Connector(Protocol):
    kind: str

    async def fetch(self, job: SourceJob, ctx: FetchContext) -> Fetched: ...


# --- helpers --------------------------------------------------------------------------------------


def clean_text(value: Any, limit: int = MAX_TITLE) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    if "&" in text or "<" in text:
        text = html_to_text(text, limit)
    return " ".join(text.split())[:limit]


def payload(
    kind: str, source: str, external_id: str, occurred_at: datetime | None, **fields: Any
) -> dict[str, Any]:
    """An item's `data`: the base payload's fields (empty strings by default) and the kind's own."""
    data: dict[str, Any] = {
        "content": "",
        "external_id": external_id,
        "external_url": "",
        "kind": kind,
        "parent_external_id": "",
        "source": source,
        "title": "",
        "url": "",
        "occurred_at": iso(occurred_at),
    }
    data.update(fields)
    return data


def apply_field_map(
    data: dict[str, Any], raw: Mapping[str, Any], field_map: Mapping[str, str], *, content: set[str]
) -> None:
    """Overrides from a field map: `{canonical name: key of the upstream record}`. Only the payload's
    own string fields can be overridden (a map cannot change an item's identity or time); unknown
    names, and keys the record lacks, are ignored. Fields in `content` are read as markup."""
    for name, key in field_map.items():
        if name in ("external_id", "kind", "source", "occurred_at") or name not in data:
            continue
        if not isinstance(data[name], str):
            continue
        value = raw.get(key)
        if value is None or isinstance(value, dict | list):
            continue
        data[name] = html_to_text(str(value)) if name in content else clean_text(value)


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: either a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - (now or datetime.now(UTC))).total_seconds())


def judge_status(response: SafeResponse, *, allow_not_modified: bool = False) -> None:
    """Raise a ConnectorError for any response but 200 (and 304 when conditional GET was used)."""
    code = response.status_code
    if code == 200 or (allow_not_modified and code == 304):
        return
    if response.is_redirect:
        location = response.headers.get("location", "")
        raise ConnectorError(
            f"HTTP {code}: redirects are not followed; the source moved to {location or '(no Location)'}"
        )
    retry = retry_after_seconds(response.headers.get("retry-after"))
    if code == 429:
        raise ConnectorError("HTTP 429: rate limited by the upstream", retry_after=retry)
    if code >= 500:
        raise ConnectorError(f"HTTP {code}: the upstream failed", retry_after=retry)
    raise ConnectorError(f"HTTP {code}")


async def fetch(ctx: FetchContext, url: str, **options: Any) -> SafeResponse:
    """One GET through the request gates; an OutboundError becomes the source's ConnectorError."""
    try:
        async with ctx.gates.enter(url):
            return await ctx.http.get(url, **options)
    except OutboundError as exc:
        raise ConnectorError(str(exc)) from exc


def utc_from_timestamp(value: Any) -> datetime | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    if not (0 <= seconds < 253402300800):  # up to year 9999
        return None
    return datetime.fromtimestamp(seconds, UTC)
