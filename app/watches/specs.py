"""What clients send: watches (WatchInput, the PATCH body), action inputs, and the action configs (the
four of openmagpie with its limits, and `email`, an extension). Structural rules live here; rules that
need settings or the database (the account's feeds and lists, non-public webhook addresses, the stored
secrets an edit keeps) live in the services."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    EmailStr,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.kit.openapi import EXTENSION
from app.kit.v1_input import MAX_INTEGER
from app.kit.windows import MAX_TEXT
from app.models import ActionKind
from app.watches.engines.names import ENGINE_KINDS, SEMANTIC_ONLY_ENGINES
from app.watches.newsletter_template import template_problems

MAX_ACTIONS = 50
MAX_WATCH_FEEDS = 100
MAX_INCLUDE_FIELDS = 64
MAX_HEADERS = 64
MAX_HEADER_NAME = 200
MAX_HEADER_VALUE = 4096
MAX_EXTRACT_FIELDS = 64
# openmagpie bounds extract instructions (2048); a filter's instructions get the same order of room.
MAX_FILTER_INSTRUCTIONS = 8000
MAX_EXTRACT_INSTRUCTIONS = 2048
# RFC 9110 token characters: what a header name may be made of.
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# What a header value may be, sent verbatim: visible ASCII, with spaces and tabs only inside (RFC 9110
# field-value without obs-text). The HTTP client refuses anything else at send time (non-ASCII cannot
# be encoded, surrounding whitespace is an illegal value), which would fail every delivery.
HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?")
# The body's framing is the client's to write: a configured one would contradict the body sent.
FRAMING_HEADERS = ("content-length", "transfer-encoding")


def _not_blank(value: str) -> str:
    value = value.strip()
    if not value:
        raise PydanticCustomError("blank", "must not be blank")
    return value


class _Config(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EngineSpec(_Config):
    """Which engine and model: an empty kind means the server's default engine, an empty model the
    engine's default model."""

    kind: Annotated[str, Field(max_length=64)] = ""
    model: Annotated[str, Field(max_length=200)] = ""

    @field_validator("kind")
    @classmethod
    def _registered(cls, value: str) -> str:
        value = value.strip()
        if value and value not in ENGINE_KINDS:
            raise PydanticCustomError(
                "engine_kind",
                "unknown engine kind {kind!r}: use one of {known} (or leave it empty for the default)",
                {"kind": value, "known": ", ".join(ENGINE_KINDS)},
            )
        return value


class SemanticFilterConfig(_Config):
    instructions: Annotated[
        str, Field(min_length=1, max_length=MAX_FILTER_INSTRUCTIONS), AfterValidator(_not_blank)
    ]
    engine: EngineSpec = EngineSpec()
    fetch_external_content: bool = True
    threshold: Annotated[float, Field(gt=0, le=1)] = 0.8


class ExtractField(_Config):
    name: Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_not_blank)]
    description: Annotated[str, Field(min_length=1, max_length=256)]


def _unique_names(fields: list[ExtractField]) -> list[ExtractField]:
    seen: set[str] = set()
    for field in fields:
        if field.name in seen:
            raise PydanticCustomError(
                "duplicate", "field names must be unique ({name!r} repeats)", {"name": field.name}
            )
        seen.add(field.name)
    return fields


class ExtractConfig(_Config):
    fields: Annotated[
        list[ExtractField], Field(min_length=1, max_length=MAX_EXTRACT_FIELDS), AfterValidator(_unique_names)
    ]
    instructions: Annotated[str, Field(max_length=MAX_EXTRACT_INSTRUCTIONS)] = ""
    engine: EngineSpec = EngineSpec()
    fetch_external_content: bool = True

    @field_validator("engine")
    @classmethod
    def _extracting_engine(cls, value: EngineSpec) -> EngineSpec:
        if value.kind in SEMANTIC_ONLY_ENGINES:
            raise PydanticCustomError(
                "engine_kind", "the {kind!r} engine scores semantic_filter only", {"kind": value.kind}
            )
        return value


IncludeFields = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=100)]], Field(max_length=MAX_INCLUDE_FIELDS)
]


class _Cadence(_Config):
    delivery: Literal["instant", "digest"] = "instant"
    # At least 0 (openmagpie's bound) and nothing more: any window length is the client's to choose, up
    # to the largest integer a behaviour value takes (its windows then still end before year 9999).
    digest_interval_seconds: Annotated[int, Field(ge=0, le=MAX_INTEGER)] = 0


class _Delivery(_Cadence):
    include_fields: IncludeFields = []


class LogConfig(_Delivery):
    prefix: Annotated[str, Field(max_length=200)] = "[watch]"

    @field_validator("prefix")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value or "\r" in value:
            raise PydanticCustomError("newline", "must be one line")
        return value


def _webhook_url(value: str) -> str:
    value = value.strip()
    try:
        parts = urlsplit(value)
        port = parts.port  # raises on an out-of-range port
    except ValueError as exc:
        raise PydanticCustomError("url", "must be a valid URL") from exc
    del port
    if parts.scheme.lower() not in ("http", "https"):
        raise PydanticCustomError("url", "must be an http or https URL")
    if not parts.hostname:
        raise PydanticCustomError("url", "must name a host")
    if any(c.isspace() for c in value) or any(ord(c) < 32 for c in value):
        raise PydanticCustomError("url", "must not contain spaces or control characters")
    return value


def _headers(value: dict[str, str]) -> dict[str, str]:
    if len(value) > MAX_HEADERS:
        raise PydanticCustomError("too_many_entries", f"must have at most {MAX_HEADERS} entries")
    for name, item in value.items():
        if not HEADER_NAME.fullmatch(name) or len(name) > MAX_HEADER_NAME:
            raise PydanticCustomError(
                "header_name", f"header names must be 1 to {MAX_HEADER_NAME} token characters"
            )
        if name.lower() in FRAMING_HEADERS:
            raise PydanticCustomError(
                "header_name", "{name} is set by the sender from the body; leave it out", {"name": name}
            )
        if len(item) > MAX_HEADER_VALUE or any(c in item for c in "\r\n\x00"):
            raise PydanticCustomError(
                "header_value",
                f"header values must be at most {MAX_HEADER_VALUE} characters, without line breaks",
            )
        if not HEADER_VALUE.fullmatch(item):
            raise PydanticCustomError(
                "header_value",
                "header values are sent verbatim: printable ASCII only, no control characters, "
                "no spaces at either end",
            )
    return value


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


class WebhookConfig(_Delivery):
    url: Annotated[str, Field(min_length=1, max_length=2048), AfterValidator(_webhook_url)]
    method: Annotated[Literal["POST", "PUT", "PATCH"], BeforeValidator(_upper)] = "POST"
    headers: Annotated[dict[str, str], AfterValidator(_headers)] = {}


MAX_EMAIL_LISTS = 100
MAX_EMAIL_TEMPLATE = 200_000
# The email API's own bounds on a campaign's subject and sender (app/mail/campaigns/campaign_rules.py).
MAX_EMAIL_SHORT = 191
# Without a word on it, an instant email action sends at most one campaign an hour; a digest's window
# already spaces its campaigns.
DEFAULT_EMAIL_INTERVAL = {"instant": 3600, "digest": 0}


def _template(value: str | None) -> str | None:
    if value is None:
        return None
    problems = template_problems(value)
    if problems:
        raise PydanticCustomError("template", "{problem}", {"problem": problems[0]})
    return value


class EmailConfig(_Cadence):
    """Beyond openmagpie (`x-tidings-extension`): the item (instant) or a window of items (digest)
    becomes a campaign of the email API, sent to lists of the same account or left as a draft. Only
    items that passed the chain's earlier actions get here. Accounts on the free plan cannot use it."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=EXTENSION)

    list_ids: Annotated[
        list[Annotated[int, Field(ge=1, le=MAX_INTEGER)]],
        Field(min_length=1, max_length=MAX_EMAIL_LISTS, description="Lists of the email API (`GET /lists`)"),
    ]
    subject: Annotated[
        str | None,
        Field(
            max_length=MAX_EMAIL_SHORT,
            description="`{{ item.title }}`, `{{ count }}` and `{{ watch.name }}` are filled in; default: "
            "the item's title for one item, `<watch name>: <count> new items` for several",
        ),
        AfterValidator(_template),
    ] = None
    template: Annotated[
        str | None,
        Field(
            max_length=MAX_EMAIL_TEMPLATE,
            description="The campaign's html: `{{ item.<field> }}`, `{{ count }}`, `{{ watch.name }}` and "
            "one `{% for item in items %}...{% endfor %}` loop are filled in; the email API's merge tags "
            "(`{{ first_name }}`, `{{ unsubscribe_url }}`) are left for the send. Default: a list of the "
            "items with their links",
        ),
        AfterValidator(_template),
    ] = None
    from_name: Annotated[
        str | None, Field(max_length=MAX_EMAIL_SHORT, description="Default: the account's user's name")
    ] = None
    from_email: Annotated[
        EmailStr | None,
        Field(max_length=MAX_EMAIL_SHORT, description="Default: the account's user's address"),
    ] = None
    mode: Annotated[
        Literal["send", "draft"],
        Field(description="`send`: out at once; `draft`: a draft campaign a person reviews and sends"),
    ] = "send"
    min_interval_seconds: Annotated[
        int | None,
        Field(
            ge=0,
            le=MAX_INTEGER,
            description="At most one campaign per this many seconds; items that come sooner wait and go "
            "together in the next one. Default: 3600 for instant delivery, 0 for a digest",
        ),
    ] = None

    @model_validator(mode="after")
    def _interval(self) -> EmailConfig:
        if self.min_interval_seconds is None:
            self.min_interval_seconds = DEFAULT_EMAIL_INTERVAL[self.delivery]
        return self


ActionConfig = SemanticFilterConfig | ExtractConfig | LogConfig | WebhookConfig | EmailConfig


class ActionInput(BaseModel):
    """One action: `kind` names it and `config` is validated against that kind's model. `id` names an
    existing action on a whole-chain edit (kept in place with its history); `rank` places it."""

    model_config = ConfigDict(extra="ignore")

    id: Annotated[str, Field(max_length=64)] = ""
    kind: str
    config: dict[str, Any]
    # Any integer: the chain service clamps it to a place (below 0 is first, past the end is last).
    rank: int | None = None

    @field_validator("kind")
    @classmethod
    def _known(cls, value: str) -> ActionKind:
        try:
            return ActionKind(value)
        except ValueError:
            raise PydanticCustomError(
                "action_kind",
                "unknown action kind {kind!r}: use one of {known}",
                {"kind": value, "known": ", ".join(ActionKind)},
            ) from None


WatchName = Annotated[str, Field(max_length=200), AfterValidator(_not_blank)]
FeedIds = Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=MAX_WATCH_FEEDS)]


class WatchInput(BaseModel):
    """Create (POST) and edit (PUT). On an edit, `feed_ids` and `actions` replace the subscription set
    and the chain when given and are left alone when absent."""

    model_config = ConfigDict(extra="ignore")

    name: WatchName
    is_active: bool = True
    feed_ids: FeedIds | None = None
    actions: Annotated[list[ActionInput], Field(max_length=MAX_ACTIONS)] | None = None


class WatchPatch(BaseModel):
    """PATCH: any of name, is_active and feed_ids; what is absent stays as it is."""

    model_config = ConfigDict(extra="ignore")

    name: WatchName | None = None
    is_active: bool | None = None
    feed_ids: FeedIds | None = None


Bound = Annotated[str | None, Field(default=None, max_length=MAX_TEXT)]


class BackfillInput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    replace: bool = False
    occurred_since: Bound = None
    occurred_until: Bound = None
    completed_since: Bound = None
    completed_until: Bound = None
