"""Input models of the email API's request bodies (validated by app.mail.input)."""

from __future__ import annotations

import base64
import binascii
import ipaddress
from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from app.kit.openapi import EXTENSION, query_parameter, query_parameters
from app.mail.campaigns.campaign_rules import (
    FromEmail,
    Html,
    Preheader,
    PublicArchive,
    ReplyTo,
    Short,
    Subject,
    TextPart,
    TimeZoneName,
    TrackOpens,
)
from app.mail.events.types import EventType
from app.mail.input import EmailStr, ListIds, as_list

MAX_BATCH = 1000
MAX_EMAIL_LENGTH = 191
MAX_IP_LENGTH = 45


def _as_text(value: Any) -> Any:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _check_ip(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        address = str(ipaddress.ip_address(value))
    except ValueError as exc:
        raise PydanticCustomError("ip", "not a valid IP address") from exc
    if len(address) > MAX_IP_LENGTH:  # an IPv6 scope id (fe80::1%eth0) can be any length
        raise PydanticCustomError("ip", "not a valid IP address")
    return address


def _key_fits(value: str) -> str:
    """The lowercased address is the contact's key and must fit its column too ('İ' lowercases to two)."""
    if len(value.lower()) > MAX_EMAIL_LENGTH:
        raise PydanticCustomError("string_too_long", "too long", {"max_length": MAX_EMAIL_LENGTH})
    return value


# The length limit sits on the str member: on the union it would also meet null, which pydantic refuses
# with a TypeError (a 500) instead of a validation error.
Name = Annotated[Annotated[str, Field(max_length=191)] | None, BeforeValidator(_as_text)]
IpAddress = Annotated[str | None, AfterValidator(_check_ip)]
ContactEmail = Annotated[EmailStr, Field(max_length=MAX_EMAIL_LENGTH), AfterValidator(_key_fits)]


class ContactFieldIn(BaseModel):
    name: Annotated[str, Field(max_length=191)]
    value: Annotated[Annotated[str, Field(max_length=65535)] | None, BeforeValidator(_as_text)] = None


class ContactCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    email: ContactEmail
    first_name: Name = None
    last_name: Name = None
    ip_address: IpAddress = None
    lists: ListIds = []
    contact_fields: Annotated[list[ContactFieldIn], BeforeValidator(as_list)] = []


class ContactUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    first_name: Name = None
    last_name: Name = None
    lists: ListIds | None = None
    contact_fields: Annotated[list[ContactFieldIn], BeforeValidator(as_list)] = []


class BatchContact(BaseModel):
    model_config = ConfigDict(extra="ignore")

    email: ContactEmail
    first_name: Name = None
    last_name: Name = None
    ip_address: IpAddress = None
    lists: ListIds = []
    contact_fields: Annotated[list[ContactFieldIn], BeforeValidator(as_list)] = []


class ContactBatch(BaseModel):
    contacts: Annotated[list[BatchContact], Field(max_length=MAX_BATCH)]


class ContactFilter(BaseModel):
    query: str | None = None
    email: str | None = None
    unsubscribed: bool | None = None


# ContactFilter as the list routes document it: every list searches with `query`; GET /contacts takes all.
SEARCH = query_parameter("query", {"type": "string"}, "Search text")
SEARCH_PARAMETERS = query_parameters(SEARCH)
CONTACT_FILTER_PARAMETERS = query_parameters(
    SEARCH,
    query_parameter("email", {"type": "string"}, "Exact email"),
    query_parameter("unsubscribed", {"type": "boolean"}),
)


class AccountPreferences(BaseModel):
    """PATCH /me (beyond SendFox): the account's preferences; what is not given stays."""

    model_config = ConfigDict(extra="ignore")

    track_opens: Annotated[
        bool | None,
        Field(
            description="Beyond SendFox: false: no email of the account carries the open pixel.",
            json_schema_extra=EXTENSION,
        ),
    ] = None
    public_archive: Annotated[
        bool | None,
        Field(
            description="Beyond SendFox: true: the account's sent campaigns that opted in "
            "(`public_archive`) are public pages and an Atom feed under /archive/{user id}.",
            json_schema_extra=EXTENSION,
        ),
    ] = None


class EmailOnly(BaseModel):
    email: ContactEmail


class SuppressionCreate(BaseModel):
    """POST /suppressions: one address (`email`), several (`emails`, at most 1000), or both."""

    model_config = ConfigDict(extra="ignore")

    email: ContactEmail | None = None
    emails: Annotated[list[ContactEmail], BeforeValidator(as_list), Field(max_length=MAX_BATCH)] = []

    def addresses(self) -> list[str]:
        return [*([self.email] if self.email is not None else []), *self.emails]


class CampaignPreviewQuery(BaseModel):
    """GET /campaigns/{id}/preview: for which contact (by id or address; neither: a reader without
    names), and as JSON parts or as the raw message (`eml`)."""

    model_config = ConfigDict(extra="ignore")

    contact_id: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    email: Annotated[str, Field(max_length=MAX_EMAIL_LENGTH)] | None = None
    format: Literal["json", "eml"] = "json"


PREVIEW_PARAMETERS = query_parameters(
    query_parameter("contact_id", {"type": "integer"}, "The contact to render it for"),
    query_parameter("email", {"type": "string"}, "The address of the contact to render it for"),
    query_parameter("format", {"type": "string", "enum": ["json", "eml"]}, "`eml`: the raw message"),
)


class CampaignTestSend(BaseModel):
    """POST /campaigns/{id}/test: the addresses to send a test email to (1 to 10)."""

    model_config = ConfigDict(extra="ignore")

    emails: Annotated[list[ContactEmail], BeforeValidator(as_list), Field(min_length=1, max_length=10)]


class ListCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: Annotated[str, Field(max_length=191)]


class CampaignCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: Short
    subject: Subject
    html: Html
    from_name: Short
    from_email: FromEmail
    scheduled_at: datetime | None = None
    timezone: TimeZoneName = None
    lists: ListIds = []
    text: TextPart = None
    preheader: Preheader = None
    reply_to: ReplyTo = None
    track_opens: TrackOpens = True
    public_archive: PublicArchive = False


class CampaignUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: Short | None = None
    subject: Subject | None = None
    html: Html | None = None
    from_name: Short | None = None
    from_email: FromEmail | None = None
    scheduled_at: datetime | None = None
    timezone: TimeZoneName = None
    lists: ListIds | None = None
    text: TextPart = None
    preheader: Preheader = None
    reply_to: ReplyTo = None
    track_opens: TrackOpens | None = None
    public_archive: PublicArchive | None = None


TriggerType = Literal["apply_list", "open_campaign", "click_campaign"]
DelayHours = Annotated[int, Field(ge=0, le=5000)]


class AutomationCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: Short
    trigger_type: TriggerType | None = None
    trigger_list_id: int | None = None
    trigger_campaign_id: int | None = None
    active: bool = False


class AutomationUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: Short | None = None
    active: bool | None = None
    trigger_type: TriggerType | None = None
    trigger_list_id: int | None = None
    trigger_campaign_id: int | None = None


class AutomationEmailCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    subject: Subject
    html: Html
    from_name: Short
    from_email: FromEmail
    delay_hours: DelayHours | None = None
    text: TextPart = None
    preheader: Preheader = None
    reply_to: ReplyTo = None
    track_opens: TrackOpens = True


class AutomationEmailUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    subject: Subject | None = None
    html: Html | None = None
    from_name: Short | None = None
    from_email: FromEmail | None = None
    delay_hours: DelayHours | None = None
    text: TextPart = None
    preheader: Preheader = None
    reply_to: ReplyTo = None
    track_opens: TrackOpens | None = None
    send_order: Annotated[int, Field(ge=1)] | None = None


class SignupIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    email: ContactEmail
    first_name: Name = None
    last_name: Name = None


# ------------------------------------------------------------------------- account webhooks (events out)

MAX_WEBHOOK_URL = 2048


def _webhook_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise PydanticCustomError("url", "must be an http or https URL with a host")
    return value


def _webhook_secret(value: str) -> str:
    """A Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 random bytes."""
    raw = value.removeprefix("whsec_")
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PydanticCustomError("secret", "must be whsec_ followed by base64") from exc
    if not 24 <= len(key) <= 64:
        raise PydanticCustomError("secret", "must encode 24 to 64 bytes")
    return "whsec_" + raw


class WebhookCreate(BaseModel):
    """`POST /webhooks` (beyond SendFox): where to send which events, and optionally the signing secret
    (made for you when missing)."""

    model_config = ConfigDict(extra="ignore")

    url: Annotated[str, Field(min_length=1, max_length=MAX_WEBHOOK_URL), AfterValidator(_webhook_url)]
    events: Annotated[list[EventType], Field(min_length=1, max_length=64)]
    secret: Annotated[str, Field(max_length=100), AfterValidator(_webhook_secret)] | None = None


class WebhookRotate(BaseModel):
    """`POST /webhooks/{id}/rotate-secret` (beyond SendFox): optionally the new signing secret (made for
    you when missing)."""

    model_config = ConfigDict(extra="ignore")

    secret: Annotated[str, Field(max_length=100), AfterValidator(_webhook_secret)] | None = None
