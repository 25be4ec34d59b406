"""The campaigns held by their sender (paused or cancelled), as a send worker last read them.

The claim skips held campaigns, but a worker may hold a batch it claimed just before a pause committed.
Before starting each email it asks `HeldCampaigns.current()`, which reads the held campaigns again when
its last reading is older than MAX_AGE (one indexed query, shared by every lane of the process, and
only while emails are being sent); an email of a held campaign is not started and goes back to the
queue. So no email of a campaign starts later than MAX_AGE after its pause committed, plus the time of
one reading. While emails are being sent the recorder writes a group every few hundredths of a second;
each write reads the held campaigns too once the last reading is READ_ALONG_AGE old (`reading_along`,
`read_along`), so `current()` seldom needs a query of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any

from psycopg import AsyncConnection
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import TwoWayStatement
from app.models import Campaign

MAX_AGE = 0.1
# The share of max_age past which the recorder's round trip reads the held campaigns too: late enough that
# a worker writing a group every 0.02 s reads them about as often as current() alone would (ten times a
# second), early enough that current() finds a fresh reading.
READ_ALONG_AGE = 0.8


@cache
def _held() -> TwoWayStatement:
    """The held campaigns' ids, through the partial index `ix_campaigns_held` (compiled at first use,
    not at import: compiling for psycopg first costs about 0.1 s, which a process that sends nothing
    need not pay)."""
    return TwoWayStatement.of(select(Campaign.id).where(Campaign.held_at.is_not(None)))


def held_campaign_ids(session: Session) -> frozenset[int]:
    return frozenset(session.scalars(_held().statement))


async def held_campaign_ids_on(connection: AsyncConnection[Any]) -> frozenset[int]:
    """The same on PostgreSQL, on a connection of psycopg's async driver in autocommit (the send worker's
    recording connection), on the event loop."""
    held = _held().psycopg
    cursor = await connection.execute(held.sql, held.params())
    return frozenset(row[0] for row in await cursor.fetchall())


class HeldCampaigns:
    """`read` returns the held campaigns' ids (a query on the event loop, or a transaction in a worker
    thread: the send worker's `held`)."""

    def __init__(
        self,
        read: Callable[[], Awaitable[frozenset[int]]],
        *,
        max_age: float = MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._max_age = max_age
        self._clock = clock
        self.last: frozenset[int] = frozenset()
        # When the reading in `last` started: a reading is as old as the moment it was asked for.
        self._read_at = float("-inf")
        self._reading: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def current(self) -> frozenset[int]:
        """The held campaigns' ids, read no longer than `max_age` ago."""
        if self._clock() - self._read_at < self._max_age:
            return self.last
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a worker driven by several asyncio.run() calls in turn (tests)
            self._loop, self._reading = loop, None
        if self._reading is None or self._reading.done():
            self._reading = loop.create_task(self._reload())
        await asyncio.shield(self._reading)
        return self.last

    def reading_along(self) -> float | None:
        """For a round trip to the database made anyway (the recorder's): None while the last reading is
        fresh enough, else the moment to give `read_along` if that round trip reads the held campaigns
        too (it is then older than `max_age * READ_ALONG_AGE`: `current()` would soon read them itself)."""
        asked_at = self._clock()
        return None if asked_at - self._read_at < self._max_age * READ_ALONG_AGE else asked_at

    def read_along(self, held: frozenset[int], asked_at: float) -> None:
        """What the round trip `reading_along` asked for at `asked_at` read."""
        if asked_at > self._read_at:  # a reading current() asked for later may have landed meanwhile
            self.last, self._read_at = held, asked_at

    async def _reload(self) -> None:
        asked_at = self._clock()
        self.last = await self._read()
        self._read_at = asked_at
