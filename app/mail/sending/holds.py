"""The campaigns held by their sender (paused or cancelled), as a send worker last read them.

The claim skips held campaigns, but a worker may hold a batch it claimed just before a pause committed.
Before starting each email it asks `HeldCampaigns.current()`, which reads the held campaigns again when
its last reading is older than MAX_AGE (one indexed query, shared by every lane of the process, and
only while emails are being sent); an email of a held campaign is not started and goes back to the
queue. So no email of a campaign starts later than MAX_AGE after its pause committed, plus the time of
one reading. While emails are being sent the recorder writes a group every few hundredths of a second;
each write reads the held campaigns too once the last reading is READ_ALONG_AGE old (`read_along`, in the
recorder's worker thread), so `current()` seldom needs a hop of its own to the database.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import cache

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from app.db import TwoWayStatement, psycopg_connection
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


def held_campaign_ids_on(connection: Connection) -> frozenset[int]:
    """The same on a PostgreSQL connection in autocommit (the send worker's recording connection),
    straight through psycopg."""
    held = _held().psycopg
    rows = psycopg_connection(connection).execute(held.sql, held.params())
    return frozenset(row[0] for row in rows)


class HeldCampaigns:
    """`read` is a blocking function (one transaction) that returns the held campaigns' ids; it runs in
    a worker thread."""

    def __init__(
        self,
        read: Callable[[], frozenset[int]],
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

    def read_along(self, read: Callable[[], frozenset[int]]) -> None:
        """In a worker thread already at the database (the recorder's): `read` the held campaigns there,
        when the last reading is old enough that `current()` would soon make a hop of its own for it."""
        asked_at = self._clock()
        if asked_at - self._read_at < self._max_age * READ_ALONG_AGE:
            return
        held = read()
        if asked_at > self._read_at:  # a reading current() asked for later may have landed meanwhile
            self.last, self._read_at = held, asked_at

    async def _reload(self) -> None:
        asked_at = self._clock()
        self.last = await asyncio.to_thread(self._read)
        self._read_at = asked_at
