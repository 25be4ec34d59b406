"""ULIDs: 26-character, time-sortable string ids (Crockford base32), monotonic within a process."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from ulid import ULID, StrictMonotonicPolicy, ULIDGenerator

_RANDOM_BYTES = 10
_TIME_MAX = (1 << 48) - 1


def _system_ms() -> int:
    return time.time_ns() // 1_000_000


def _random_with_headroom(_ms: int) -> bytes:
    # The top bit of the random part starts clear, so counting up within one millisecond (the monotonic
    # policy) never runs out of successors: the strict policy would raise on an overflow.
    return (int.from_bytes(os.urandom(_RANDOM_BYTES), "big") >> 1).to_bytes(_RANDOM_BYTES, "big")


class UlidFactory:
    """Within one millisecond the random part counts up, so ids made one after another sort in the
    order they were made (the ULID spec's monotonic mode, python-ulid's strict policy); a new
    millisecond draws a fresh random part. A clock that steps back (NTP) does not step the ids back:
    they stay on the last millisecond seen and keep counting up."""

    def __init__(self, clock: Callable[[], int] = _system_ms) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_ms = 0
        self._generator = ULIDGenerator(randomness=_random_with_headroom, policy=StrictMonotonicPolicy())

    def new(self) -> str:
        with self._lock:
            ms = min(max(self._clock(), self._last_ms), _TIME_MAX)
            self._last_ms = ms
            return str(self._generator.generate(ms))


_factory = UlidFactory()


def new_ulid() -> str:
    return _factory.new()


def ulid_floor(moment: datetime) -> str:
    """The smallest ULID of `moment`'s millisecond: every id made at or after it sorts at or above it."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    ms = max(0, min(int(moment.timestamp() * 1000), _TIME_MAX))
    return str(ULID.from_bytes(ms.to_bytes(6, "big") + bytes(_RANDOM_BYTES)))


def normalize_ulid(value: str) -> str | None:
    """`value` as a canonical (upper-case) ULID, or None when it is not one. ULIDs are case-insensitive."""
    try:
        return str(ULID.from_str(value))
    except ValueError:
        return None
