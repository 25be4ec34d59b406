"""Rules shared by campaigns and automation emails: field limits, the subject rule, scheduling checks."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.principal import AccountInfo
from app.kit.errors import Forbidden, ValidationFailed
from app.kit.openapi import EXTENSION
from app.kit.time import iso, utcnow
from app.mail.input import EmailStr
from app.models import Campaign, CampaignList, ContactList

MAX_HTML = 1_000_000
MAX_SHORT = 191
MAX_PREHEADER = 255
# What a request body's field beyond SendFox's API carries in the OpenAPI document.


def _no_reply_prefix(value: str | None) -> str | None:
    if value is not None and value.upper().startswith(("RE:", "FWD:")):
        raise PydanticCustomError("reply_prefix", "must not start with RE: or FWD:")
    return value


def _blank_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _known_timezone(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise PydanticCustomError("timezone", "not a valid timezone") from exc
    return value


Short = Annotated[str, Field(max_length=MAX_SHORT)]
Subject = Annotated[str, Field(max_length=MAX_SHORT), AfterValidator(_no_reply_prefix)]
Html = Annotated[str, Field(max_length=MAX_HTML)]
FromEmail = Annotated[EmailStr, Field(max_length=MAX_SHORT)]
TimeZoneName = Annotated[str | None, AfterValidator(_known_timezone)]

# The parts of an email beyond SendFox's fields, on campaigns and automation emails alike; on a PATCH
# null (or, for the text ones, blank) takes a part away.
TextPart = Annotated[
    Annotated[str, Field(max_length=MAX_HTML)] | None,
    BeforeValidator(_blank_is_none),
    Field(
        description="Beyond SendFox: the plain-text part as written (merge tags filled, its URLs tracked); "
        "null or blank: made from the html at each send.",
        json_schema_extra=EXTENSION,
    ),
]
Preheader = Annotated[
    Annotated[str, Field(max_length=MAX_PREHEADER)] | None,
    BeforeValidator(_blank_is_none),
    Field(
        description="Beyond SendFox: the preview text inboxes show after the subject, hidden in the "
        "opened email (merge tags allowed).",
        json_schema_extra=EXTENSION,
    ),
]
ReplyTo = Annotated[
    Annotated[EmailStr, Field(max_length=MAX_SHORT, json_schema_extra={"format": "email"})] | None,
    BeforeValidator(_blank_is_none),
    Field(
        description="Beyond SendFox: the address replies go to (a Reply-To header); null: the from address.",
        json_schema_extra=EXTENSION,
    ),
]
PublicArchive = Annotated[
    bool,
    Field(
        description="Beyond SendFox: list it, once sent, in the account's public archive (when the "
        "account has one: `public_archive` of PATCH /me); default false.",
        json_schema_extra=EXTENSION,
    ),
]
TrackOpens = Annotated[
    bool,
    Field(
        description="Beyond SendFox: whether its emails carry the open pixel (default true; the "
        "account's own `track_opens`, PATCH /me, turns it off for all its emails).",
        json_schema_extra=EXTENSION,
    ),
]


def to_utc(moment: datetime, timezone: str) -> datetime:
    """A date-time without an offset is wall-clock time in the campaign's time zone."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=ZoneInfo(timezone))
    try:
        return moment.astimezone(ZoneInfo("UTC"))
    except OverflowError as exc:  # 0001-01-01 east of UTC, 9999-12-31 west of it
        raise ValidationFailed({"scheduled_at": ["The scheduled at field must be a valid date."]}) from exc


def check_can_send(account: AccountInfo) -> None:
    """403 while the account is in its sending warm-up."""
    if account.warmup_until is not None and account.warmup_until > utcnow():
        raise Forbidden(
            f"Your account is warming up: sending and scheduling open at {iso(account.warmup_until)}."
        )


def check_timezone_configured(timezone: str | None) -> str:
    if not timezone:
        raise ValidationFailed(
            {"timezone": ["Set a timezone for your account or campaign before scheduling."]}
        )
    return timezone


def live_list_ids(session: Session, campaign_id: int) -> list[int]:
    return list(
        session.scalars(
            select(CampaignList.list_id)
            .join(ContactList, ContactList.id == CampaignList.list_id)
            .where(CampaignList.campaign_id == campaign_id, ContactList.deleted_at.is_(None))
            .order_by(CampaignList.list_id)
        )
    )


class EmailPartsInput(Protocol):
    """A request body with the parts (CampaignCreate/Update, AutomationEmailCreate/Update)."""

    @property
    def text(self) -> str | None: ...
    @property
    def preheader(self) -> str | None: ...
    @property
    def reply_to(self) -> str | None: ...
    @property
    def track_opens(self) -> bool | None: ...
    @property
    def model_fields_set(self) -> set[str]: ...


EMAIL_PARTS = ("text", "preheader", "reply_to")


def set_email_parts(campaign: Campaign, body: EmailPartsInput) -> bool:
    """The parts beyond SendFox's fields that the body gives: null takes a text part, preheader or
    Reply-To away; the open pixel switch is never null. Whether the body gave any."""
    given = body.model_fields_set
    if "track_opens" in given and body.track_opens is None:
        raise ValidationFailed({"track_opens": ["The track opens field must be true or false."]})
    for name in EMAIL_PARTS:
        if name in given:
            setattr(campaign, name, getattr(body, name))
    if body.track_opens is not None:
        campaign.track_opens = body.track_opens
    return bool(given & {*EMAIL_PARTS, "track_opens"})
