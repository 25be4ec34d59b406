"""ULIDs: 26-character, time-sortable string ids (Crockford base32), monotonic within a process."""

from __future__ import annotations

import os
import re
import threading
import time
from datetime import UTC, datetime

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ULID_PATTERN = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
_RANDOM_BITS = 80
_RANDOM_MAX = (1 << _RANDOM_BITS) - 1
_TIME_MAX = (1 << 48) - 1


def _encode(value: int) -> str:
    chars = []
    for _ in range(26):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


class UlidFactory:
    """Within one millisecond the random part counts up, so ids made one after another sort in the
    order they were made (the ULID spec's monotonic mode); a new millisecond draws a fresh random part."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def new(self, at_ms: int | None = None) -> str:
        with self._lock:
            ms = int(time.time() * 1000) if at_ms is None else at_ms
            if ms <= self._last_ms:
                ms = self._last_ms
                random = self._last_random + 1
                if random > _RANDOM_MAX:
                    ms += 1
                    random = int.from_bytes(os.urandom(10), "big") >> 1
            else:
                # One bit of headroom: a burst within the millisecond never runs out of successors.
                random = int.from_bytes(os.urandom(10), "big") >> 1
            self._last_ms, self._last_random = ms, random
        return _encode((min(ms, _TIME_MAX) << _RANDOM_BITS) | random)


_factory = UlidFactory()


def new_ulid() -> str:
    return _factory.new()


def ulid_floor(moment: datetime) -> str:
    """The smallest ULID of `moment`'s millisecond: every id made at or after it sorts at or above it."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    ms = max(0, min(int(moment.timestamp() * 1000), _TIME_MAX))
    return _encode(ms << _RANDOM_BITS)


def normalize_ulid(value: str) -> str | None:
    """`value` as a canonical (upper-case) ULID, or None when it is not one. ULIDs are case-insensitive."""
    if len(value) != 26:
        return None
    upper = value.upper()
    return upper if ULID_PATTERN.fullmatch(upper) else None


def ulid_time(value: str) -> datetime:
    """When a ULID was made (millisecond precision)."""
    ms = 0
    for char in value[:10]:
        ms = ms * 32 + ALPHABET.index(char)
    return datetime.fromtimestamp(ms / 1000, UTC)
