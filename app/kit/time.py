"""The clock and the one timestamp format of the APIs (UTC, ISO 8601 with `Z`)."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    """UTC ISO 8601 with six fractional digits and `Z`, as SendFox (Laravel) writes its timestamps."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    # isoformat, not strftime: %Y does not pad years before 1000 to four digits.
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def iso_naive_utc(value: datetime | None) -> str | None:
    """`iso` for a naive datetime already in UTC (as stored), without time zone arithmetic."""
    if value is None:
        return None
    return value.isoformat(timespec="microseconds") + "Z"


def iso_millis(value: datetime) -> str:
    """UTC ISO 8601 with milliseconds and `Z`: how JavaScript's Date serialises (better-auth's JSON)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"
