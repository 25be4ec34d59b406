"""What clients send: feeds (FeedInput, CuratedFeedConfig), sources (SourceInput and the four spec
variants), source sets, and the PATCH body. Structural rules live here; rules that need settings or
the database (non-public addresses, the account's rows) live in the services."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from app.kit.time import utcnow
from app.kit.v1_input import MAX_INTEGER

MAX_SOURCES = 1000
MAX_MAP_ENTRIES = 64
MAX_MAP_KEY = 200
MAX_MAP_VALUE = 1000
# A client's clock may run a little ahead of ours: "now" from it is not "the future".
CLOCK_SKEW = timedelta(seconds=60)
# Reddit community names: letters, digits and underscores, 2 to 21 characters (old ones are shorter).
COMMUNITY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]{1,20}")


def _string_map(value: dict[str, str]) -> dict[str, str]:
    if len(value) > MAX_MAP_ENTRIES:
        raise PydanticCustomError("too_many_entries", f"must have at most {MAX_MAP_ENTRIES} entries")
    for key, item in value.items():
        if not key or len(key) > MAX_MAP_KEY:
            raise PydanticCustomError("bad_key", f"keys must be 1 to {MAX_MAP_KEY} characters")
        if len(item) > MAX_MAP_VALUE:
            raise PydanticCustomError("too_long", f"values must be at most {MAX_MAP_VALUE} characters")
    return value


StringMap = Annotated[dict[str, str], AfterValidator(_string_map)]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    def display(self) -> str:
        raise NotImplementedError


class ForumCommunitySpec(_Spec):
    """A community's newest posts (Reddit's /r/<community>/new listing)."""

    kind: Literal["forum_community"]
    community: str

    @field_validator("community")
    @classmethod
    def _community(cls, value: str) -> str:
        name = value.removeprefix("/").removeprefix("r/")
        if not COMMUNITY_PATTERN.fullmatch(name):
            raise PydanticCustomError(
                "community", "must be a community name: 2 to 21 letters, digits or underscores"
            )
        return name

    def display(self) -> str:
        return f"r/{self.community}"


class RssSpec(_Spec):
    """An RSS or Atom document at a URL."""

    kind: Literal["rss"]
    url: Annotated[str, Field(min_length=1, max_length=2048)]
    name: Annotated[str, Field(max_length=200)] = ""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        try:
            parts = urlsplit(value)
            # urlsplit checks the port only when asked: 99999 or -1 would otherwise be stored.
            _ = parts.port
        except ValueError as exc:
            raise PydanticCustomError("url", "must be a valid URL") from exc
        if parts.scheme.lower() not in ("http", "https"):
            raise PydanticCustomError("url", "must be an http or https URL")
        if not parts.hostname:
            raise PydanticCustomError("url", "must name a host")
        if any(c.isspace() for c in value):
            raise PydanticCustomError("url", "must not contain spaces")
        return value

    def display(self) -> str:
        return self.name or self.url


class BoardFeedSpec(_Spec):
    """Hacker News stories (new, Show HN or Ask HN), optionally those matching a query."""

    kind: Literal["board_feed"]
    feed: Literal["new", "show", "ask"] = "new"
    match: Literal["all", "any"] = "all"
    query: Annotated[str, Field(max_length=500)] = ""

    def display(self) -> str:
        label = f"HN {self.feed}"
        if self.query:
            label += f": {self.query}" + (" (any word)" if self.match == "any" else "")
        return label


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "must not be blank")
    return value


class BoardCommentSpec(_Spec):
    """Hacker News comments matching a query."""

    kind: Literal["board_comment"]
    match: Literal["all", "any"] = "all"
    query: Annotated[str, Field(min_length=1, max_length=500), AfterValidator(_not_blank)]

    def display(self) -> str:
        return f"HN comments: {self.query}" + (" (any word)" if self.match == "any" else "")


SourceSpec = Annotated[
    ForumCommunitySpec | RssSpec | BoardFeedSpec | BoardCommentSpec, Field(discriminator="kind")
]
# openmagpie's names of the kinds Tidings names otherwise, taken on input (answers use Tidings' names).
OPENMAGPIE_KINDS = {
    "reddit_subreddit": "forum_community",
    "hn_feed": "board_feed",
    "hn_comment": "board_comment",
}


def tidings_spec(value: Any) -> Any:
    """A spec written with openmagpie's kind names (`reddit_subreddit` with `subreddit`, `hn_feed`,
    `hn_comment`) as Tidings' spec of that kind."""
    # A kind that is not a string (a list, an object: anything a client sends) is left to the models' own
    # message; only a string can be looked up.
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
        return value
    if value["kind"] not in OPENMAGPIE_KINDS:
        return value
    spec = {**value, "kind": OPENMAGPIE_KINDS[value["kind"]]}
    if "subreddit" in spec and "community" not in spec:
        spec["community"] = spec.pop("subreddit")
    return spec


SPEC_MODELS: dict[str, type[_Spec]] = {
    "forum_community": ForumCommunitySpec,
    "rss": RssSpec,
    "board_feed": BoardFeedSpec,
    "board_comment": BoardCommentSpec,
}


def spec_hash(spec: _Spec) -> str:
    """A source's identity: SHA-256 of its spec with defaults filled and keys sorted."""
    canonical = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _not_future(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        # Stored in UTC: a moment that has no UTC equivalent (year 1 at +14:00) is refused here
        # rather than failing when the row is written.
        value = value.astimezone(UTC)
    except OverflowError as exc:
        raise PydanticCustomError("date_range", "must be a date-time between the years 1 and 9999") from exc
    now = utcnow()
    if value > now + CLOCK_SKEW:
        raise PydanticCustomError(
            "future", "must not be in the future (null means live mode from now; a past time backfills)"
        )
    return min(value, now)


class SourceInput(BaseModel):
    """One source of a feed. Unknown keys (the `id`, `display`, ... of an exported SourceWire) are
    ignored, so an export can be sent back as it is."""

    model_config = ConfigDict(extra="ignore")

    spec: Annotated[SourceSpec, BeforeValidator(tidings_spec)]
    meta: StringMap = {}
    field_map: StringMap = {}
    last_event_at: Annotated[datetime | None, AfterValidator(_not_future)] = None


class SourceSetPayload(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: Literal["v1"] = "v1"
    sources: Annotated[list[SourceInput], Field(max_length=MAX_SOURCES)] = []
    # openmagpie's `magpie feed source set --dry-run` asks for its dry run here, in the body, beside
    # the query's `?dry_run=`: either one makes the request a dry run.
    dry_run: bool = False


class SeekInput(BaseModel):
    """POST .../seek: where to move the watermark (app/kit/windows' grammar, `oldest` included)."""

    model_config = ConfigDict(extra="ignore")

    to: Annotated[str, Field(min_length=1, max_length=64)]
    dry_run: bool = False


class CuratedFeedConfig(BaseModel):
    model_config = ConfigDict(extra="ignore")

    default_field_map: StringMap = {}
    # Any positive number of days, as openmagpie sets no bound (only the column's size caps it; see
    # docs/compatibility.md).
    retention_days: Annotated[int, Field(ge=1, le=MAX_INTEGER)] = 30


def _feed_name(value: str) -> str:
    value = value.strip()
    if not value:
        raise PydanticCustomError("blank", "must not be blank")
    return value


class FeedFields(BaseModel):
    """What a feed write carries (FeedInput is the create's check of it, FeedEdit the edit's)."""

    model_config = ConfigDict(extra="ignore")

    name: Annotated[str, Field(max_length=200), AfterValidator(_feed_name)]
    kind: Annotated[str, Field(max_length=64)] = "curated"
    is_active: bool = True
    # Any positive interval, stored and returned as given; the poller applies the operator's floor
    # (TIDINGS_FEED_MIN_POLL_SECONDS) when it schedules the next poll, not the API.
    poll_interval_seconds: Annotated[int, Field(ge=1, le=MAX_INTEGER)] = 300
    data: CuratedFeedConfig = CuratedFeedConfig()
    sources: Annotated[list[SourceInput] | None, Field(max_length=MAX_SOURCES)] = None


class FeedInput(FeedFields):
    """Create (POST) and edit (PUT). A create's `kind` must be `curated`; an edit's must be the feed's
    own (any other is 409 `kind_immutable`). On an edit, `sources` with entries replaces the feed's
    sources by diff; absent or empty, it leaves them alone (openmagpie's `magpie feed edit` always sends
    `"sources": []`)."""

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value != "curated":
            raise PydanticCustomError("feed_kind", "must be 'curated' (the only feed kind)")
        return value


class FeedEdit(FeedFields):
    """Edit (PUT): `kind` is not checked as input, because any kind other than the feed's own, known
    or not, is an attempt to change it: the service answers 409 `kind_immutable`."""


class FeedPatch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    is_active: bool


def source_inputs(body: Any) -> Any:
    """A sources body may be a SourceSetPayload or a bare array of SourceInput."""
    if isinstance(body, list):
        return {"version": "v1", "sources": body}
    return body
