"""An account's days: the zone they are counted in, the day an instant falls on, where a day starts (across
daylight saving changes, midnight skipped or repeated), and the end of a warm-up of whole days."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.kit.time import account_zone, local_day, midnight_after, start_of_day, start_of_next_day

LA = ZoneInfo("America/Los_Angeles")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_an_account_without_a_known_zone_counts_utc_days() -> None:
    assert account_zone("America/Los_Angeles") == LA
    for name in (None, "", "Nowhere/Special", "../etc/passwd"):
        assert account_zone(name) == ZoneInfo("UTC")


def test_the_day_an_instant_falls_on_is_the_accounts() -> None:
    # Los Angeles in January is UTC-8: its day changes at 08:00 UTC.
    assert local_day(at("2030-01-15T07:59:59Z"), LA) == date(2030, 1, 14)
    assert local_day(at("2030-01-15T08:00:00Z"), LA) == date(2030, 1, 15)
    assert local_day(at("2030-01-15T00:00:10Z"), LA) == date(2030, 1, 14)
    # A naive instant is UTC.
    assert local_day(datetime(2030, 1, 15, 7, 59, 59), LA) == date(2030, 1, 14)
    assert local_day(at("2030-01-31T23:59:59Z"), ZoneInfo("UTC")) == date(2030, 1, 31)
    assert start_of_next_day(at("2030-01-31T23:59:59Z"), ZoneInfo("UTC")) == at("2030-02-01T00:00:00Z")
    assert start_of_next_day(at("2030-01-15T07:59:59Z"), LA) == at("2030-01-15T08:00:00Z")
    assert start_of_next_day(at("2030-01-15T08:00:00Z"), LA) == at("2030-01-16T08:00:00Z")


@pytest.mark.parametrize(
    ("zone", "day", "starts", "hours"),
    [
        ("America/Los_Angeles", date(2030, 1, 15), "2030-01-15T08:00:00Z", 24),
        # Clocks go forward at 02:00: a day of 23 hours, then days that start at 07:00 UTC.
        ("America/Los_Angeles", date(2030, 3, 10), "2030-03-10T08:00:00Z", 23),
        ("America/Los_Angeles", date(2030, 11, 3), "2030-11-03T07:00:00Z", 25),
        # Havana skips midnight itself (00:00 becomes 01:00): the day starts at its 01:00.
        ("America/Havana", date(2030, 3, 10), "2030-03-10T05:00:00Z", 23),
        # Santiago turns 24:00 back to 23:00: that Saturday has 25 hours.
        ("America/Santiago", date(2030, 4, 6), "2030-04-06T03:00:00Z", 25),
        ("Asia/Tokyo", date(2030, 1, 15), "2030-01-14T15:00:00Z", 24),
    ],
)
def test_a_day_starts_at_its_first_instant_whatever_the_clocks_do(
    zone: str, day: date, starts: str, hours: int
) -> None:
    tz = ZoneInfo(zone)
    first = start_of_day(day, tz)
    assert first == at(starts) and first.tzinfo == UTC
    assert local_day(first, tz) == day
    assert local_day(first - timedelta(microseconds=1), tz) == day - timedelta(days=1)
    assert start_of_day(day + timedelta(days=1), tz) - first == timedelta(hours=hours)


@pytest.mark.parametrize(
    ("made", "opens"),
    [
        # Made in the last second of the account's 14 January: three whole days, then its next midnight.
        ("2030-01-15T07:59:59Z", "2030-01-18T08:00:00Z"),
        # Made at its midnight: exactly three days.
        ("2030-01-15T08:00:00Z", "2030-01-18T08:00:00Z"),
        # A second later: never shorter than three days, so the midnight after.
        ("2030-01-15T08:00:01Z", "2030-01-19T08:00:00Z"),
    ],
)
def test_a_warm_up_of_whole_days_ends_at_the_accounts_midnight(made: str, opens: str) -> None:
    assert midnight_after(at(made), 3, LA) == at(opens)


def test_a_warm_up_across_a_daylight_saving_change_still_ends_at_local_midnight() -> None:
    # 9 March, 23:30 in Los Angeles (PST); two days later is 11 March 23:30 PDT, then its midnight.
    opens = midnight_after(at("2030-03-10T07:30:00Z"), 2, LA)
    assert opens == at("2030-03-12T07:00:00Z")
    assert opens.astimezone(LA).time().isoformat() == "00:00:00"
