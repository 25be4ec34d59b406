"""The clock, the one timestamp format of the APIs (UTC, ISO 8601 with `Z`), and an account's days.

Instants are stored and compared in UTC. Where a rule counts days (the daily send cap, the sending
warm-up), the days are the account's own: calendar days in its `timezone`, from local midnight to local
midnight (23 or 25 hours long across a daylight saving change).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def utcnow() -> datetime:
    return datetime.now(UTC)


def account_zone(name: str | None) -> ZoneInfo:
    """The time zone an account's days are counted in: its `timezone`, or UTC when it has none (or one
    this machine's time zone database does not know)."""
    if not name:
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def local_day(moment: datetime, zone: ZoneInfo) -> date:
    """The calendar day `moment` falls on in `zone` (a naive moment is taken as UTC)."""
    return _aware(moment).astimezone(zone).date()


def start_of_day(day: date, zone: ZoneInfo) -> datetime:
    """The first instant (in UTC) of `day` in `zone`.

    Midnight with fold=0 is that instant in every case: where a daylight saving change skips midnight
    (clocks jump from 00:00 to 01:00), fold=0 reads it with the offset before the jump, which lands on
    the first instant after it; where midnight happens twice, fold=0 is the first of the two.
    """
    return datetime.combine(day, time(), tzinfo=zone).astimezone(UTC)


def start_of_next_day(moment: datetime, zone: ZoneInfo) -> datetime:
    """The first instant of the day after the one `moment` falls on in `zone`, in UTC."""
    return start_of_day(local_day(moment, zone) + timedelta(days=1), zone)


def midnight_after(moment: datetime, days: int, zone: ZoneInfo) -> datetime:
    """The first midnight of `zone` at least `days` calendar days after `moment`, in UTC: the end of a
    period that holds `days` whole days of the account's calendar (each 23 to 25 hours long)."""
    day = local_day(moment, zone)
    at_midnight = _aware(moment) == start_of_day(day, zone)
    return start_of_day(day + timedelta(days=days if at_midnight else days + 1), zone)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


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
