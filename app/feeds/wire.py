"""What /v1 answers about feeds: the wire schemas of feeds, sources, items and telemetry (openmagpie's
names), and the builders that fill them from rows. What every /v1 answer shares is in kit/v1_wire."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from app.feeds.specs import CuratedFeedConfig, SourceSpec
from app.kit.v1_wire import Timestamp, row_fields
from app.models import Feed, Source


class SourceWire(BaseModel):
    id: str
    spec: SourceSpec
    display: str
    meta: dict[str, str] = {}
    field_map: dict[str, str] = {}
    last_event_at: Timestamp | None = None
    created_at: Timestamp | None = None
    # Polling state, beyond openmagpie's fields: the last error of this source and its backoff.
    last_polled_at: Timestamp | None = None
    last_error: str | None = None
    consecutive_failures: int = 0
    retry_at: Timestamp | None = None


class FeedWire(BaseModel):
    id: str
    name: str
    kind: str
    is_active: bool
    poll_interval_seconds: int
    user_id: str
    data: CuratedFeedConfig
    created_at: Timestamp | None = None
    last_polled_at: Timestamp | None = None
    next_poll_at: Timestamp | None = None
    # Beyond openmagpie's fields: what went wrong in the last poll, and how many polls in a row did.
    last_error: str | None = None
    consecutive_failures: int = 0


class FeedView(FeedWire):
    source_count: int = 0
    sources: list[SourceWire] = []
    summary: dict[str, Any] = {}


class FeedMutationResponse(FeedView):
    id: str | None = None  # type: ignore[assignment]
    dry_run: bool


class FeedListResponse(BaseModel):
    items: list[FeedWire]
    next_cursor: str | None


class SourceSetResult(BaseModel):
    added: int
    removed: int
    persisted: int
    source_count: int


class SourceSeekResult(BaseModel):
    """A seek's tally over the sources in scope: `advanced` moved forward to `to`, `rewound` back,
    `unchanged` were there already. `to` is the resolved moment; `dry_run` echoes the request."""

    advanced: int
    rewound: int
    unchanged: int
    source_count: int
    to: Timestamp
    dry_run: bool


class SourceSetOut(BaseModel):
    """GET /v1/feeds/{id}/sources: the export format, which PUT and POST take back as it is."""

    version: Literal["v1"] = "v1"
    sources: list[SourceWire]
    # The same sources again, under the key openmagpie's server answers (its CLI reads this one).
    items: list[SourceWire]


class BasePayload(BaseModel):
    model_config = ConfigDict(extra="allow")

    content: str = ""
    external_id: str = ""
    external_url: str = ""
    kind: str = ""
    parent_external_id: str = ""
    source: str = ""
    title: str = ""
    url: str = ""
    occurred_at: Timestamp | None = None


class RssEntryPayload(BasePayload):
    author: str = ""
    categories: list[str] = []
    feed_url: str = ""


class NewPostPayload(BasePayload):
    author: str = ""
    community: str = ""
    permalink: str = ""


class BoardFeedPayload(BasePayload):
    author: str = ""
    feed: str = ""
    num_comments: int = 0
    points: int = 0


class BoardCommentPayload(BasePayload):
    author: str = ""
    feed: str = ""
    story_title: str = ""


class FeedItemWire(BaseModel):
    id: str
    source_kind: str
    external_id: str
    occurred_at: Timestamp | None = None
    source_label: str = ""
    data: RssEntryPayload | NewPostPayload | BoardFeedPayload | BoardCommentPayload | BasePayload


class FeedItemListResponse(BaseModel):
    items: list[FeedItemWire]
    next_cursor: str | None


class TelemetryState(BaseModel):
    mode: str
    can_set: bool
    emitting: bool | None = None


class TelemetryInput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mode: Literal["off", "on"]


class TelemetrySwitch(BaseModel):
    """POST /v1/telemetry, openmagpie's form of the switch: `enabled` true is `on`, false `off`."""

    model_config = ConfigDict(extra="ignore")

    enabled: bool


class FeedOverview(FeedWire):
    """A feed in the console's list: its sources and how many items it holds (not an API answer)."""

    sources: list[SourceWire] = []
    item_count: int = 0


class FeedOverviewPage(BaseModel):
    items: list[FeedOverview]
    next_cursor: str | None


# --- builders: rows to the models above ----------------------------------------------------------


def source_wire(source: Source) -> SourceWire:
    return SourceWire.model_validate(source, from_attributes=True)


def feed_wire(feed: Feed) -> FeedWire:
    user_id = str(feed.user_id) if feed.user_id is not None else ""
    data = CuratedFeedConfig(default_field_map=feed.default_field_map, retention_days=feed.retention_days)
    return FeedWire(**row_fields(FeedWire, feed, user_id=user_id, data=data))


def feed_with_sources_wire(feed: Feed, sources: list[Source]) -> FeedView:
    # Curated feeds have nothing to summarise beyond their sources: `summary` stays empty.
    return FeedView(
        **dict(feed_wire(feed)), source_count=len(sources), sources=[source_wire(s) for s in sources]
    )
