"""ULIDs: canonical format, order within a millisecond and across a clock step back, the floor of a moment."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from app.kit.ids import UlidFactory, new_ulid, normalize_ulid, ulid_floor

CANONICAL = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
MOMENT = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
MOMENT_MS = int(MOMENT.timestamp() * 1000)


def test_new_ids_are_canonical_and_distinct() -> None:
    made = [new_ulid() for _ in range(1000)]
    assert all(CANONICAL.fullmatch(value) for value in made)
    assert len(set(made)) == len(made)


def test_ids_made_in_one_millisecond_sort_in_the_order_they_were_made() -> None:
    factory = UlidFactory(clock=lambda: MOMENT_MS)
    made = [factory.new() for _ in range(5000)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert {value[:10] for value in made} == {made[0][:10]}


def test_a_new_millisecond_sorts_after_the_last_and_carries_its_time() -> None:
    now = [MOMENT_MS]
    factory = UlidFactory(clock=lambda: now[0])
    first = factory.new()
    now[0] += 1
    second = factory.new()
    assert first < second
    assert ulid_floor(MOMENT) <= first < ulid_floor(MOMENT + timedelta(milliseconds=1)) <= second


def test_a_clock_stepping_back_does_not_step_the_ids_back() -> None:
    now = [MOMENT_MS]
    factory = UlidFactory(clock=lambda: now[0])
    before = factory.new()
    now[0] -= 60_000
    after = [factory.new() for _ in range(3)]
    assert [before, *after] == sorted([before, *after])
    assert after[0][:10] == before[:10]


def test_the_floor_of_a_moment() -> None:
    floor = ulid_floor(MOMENT)
    assert floor == ulid_floor(MOMENT.replace(tzinfo=None))
    assert CANONICAL.fullmatch(floor)
    assert floor.endswith("0" * 16)
    assert ulid_floor(MOMENT - timedelta(milliseconds=1)) < floor
    assert ulid_floor(datetime(1960, 1, 1, tzinfo=UTC)) == "0" * 26


def test_normalize() -> None:
    value = new_ulid()
    assert normalize_ulid(value) == value
    assert normalize_ulid(value.lower()) == value
    assert normalize_ulid(value[:-1]) is None
    assert normalize_ulid(value + "0") is None
    assert normalize_ulid("8" + value[1:]) is None  # past the 48-bit time
    assert normalize_ulid(value[:-1] + "U") is None  # not in Crockford's alphabet
    assert normalize_ulid(value[:-1] + "l") is None
    assert normalize_ulid("é" * 26) is None
