"""Rules shared by campaigns and automation emails: field limits, the subject rule, scheduling checks."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.principal import AccountInfo
from app.kit.errors import Forbidden, ValidationFailed
from app.kit.time import iso, utcnow
from app.mail.input import EmailStr
from app.models import CampaignList, ContactList

MAX_HTML = 1_000_000
MAX_SHORT = 191


def _no_reply_prefix(value: str | None) -> str | None:
    if value is not None and value.upper().startswith(("RE:", "FWD:")):
        raise PydanticCustomError("reply_prefix", "must not start with RE: or FWD:")
    return value


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
