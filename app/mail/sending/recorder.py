"""Writing send outcomes to the database in small groups as the relay answers, not a batch at a time.

An email the relay accepted but whose `sent` is not yet written is sent again if the worker dies (its row
goes back to the queue when the claim's lease ends). Recording a whole batch at the end left up to a
batch per lane in that window (measured: 275 and 329 duplicates per kill -9 with batches of 200 on four
lanes). Here every outcome goes into one process-wide buffer that a single writer empties as soon as it
holds GROUP_SIZE outcomes or its oldest has waited FLUSH_INTERVAL, whichever comes first (or at once when
a lane flushes at the end of its batch, or a sender waits for a place): one statement per group, in a
worker thread, so the coroutines feeding the SMTP connections never wait for the database.

What a kill can leave sent twice is bounded by a count, not by arithmetic on group sizes: an email takes
a place (`admit`) right before its first byte goes to the relay (the transport takes it, under its
connection), and the place is free again only once that email's outcome is written. At most
UNRECORDED_LIMIT emails hold a place, so at most that many are on the wire or accepted and not yet
recorded at any moment, however many lanes a process has and however slowly the database answers (a
loaded machine: without a bound the filling group grew with the write's duration, 110 duplicates a kill
-9 were measured; a bound on the filling group alone let every sender already past it add one more, up
to 52). Emails waiting for a connection hold none: places taken that early left fewer for the groups,
and the senders waited for them (0.92 of the send rate).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from app.mail.sending.queue import Outcome

log = logging.getLogger("tidings.sending")

# At most this many emails of a process on the wire or accepted and not yet recorded: what a kill -9
# can leave sent twice (issue 27's bound). Exact while the emails on its connections alone are fewer (at
# most two a connection, one being sent and one content held, see smtp.py): up to 24 connections, three
# times the default (admit never holds back an email when every place is on the wire).
UNRECORDED_LIMIT = 50
# A group is written once it holds this many outcomes (or sooner, see FLUSH_INTERVAL and admit). Each
# group is one statement and a thread hop, so fewer, larger groups cost less CPU an email (a quarter
# fewer than groups of 16); 21 leaves room in UNRECORDED_LIMIT for the next group to fill while one is
# written and for the emails on the wire.
GROUP_SIZE = 21
# A group not yet full is written once its oldest outcome has waited this long. Each write costs about
# 300 us of CPU whatever its size, so groups should fill: at 0.01 s a worker sending 400 to 800 emails a
# second wrote groups of 4 to 9 (30 to 70 us an email); from 210 a second on, 0.1 s leaves the size to
# close each group. What a kill can leave sent twice is bounded by UNRECORDED_LIMIT, not by their age.
FLUSH_INTERVAL = 0.1


class Place:
    """One email's place (OutcomeRecorder.admit), taken by the transport right before the email's first
    byte goes to the relay (Transport.send's `admit`): awaited again (another connection, another relay
    after a refused connection), it takes nothing more. `taken` tells the recorder whether the email's
    outcome frees a place."""

    __slots__ = ("_recorder", "taken")

    def __init__(self, recorder: OutcomeRecorder) -> None:
        self._recorder = recorder
        self.taken = False

    async def __call__(self) -> None:
        if not self.taken:
            await self._recorder.admit()
            self.taken = True


class OutcomeRecorder:
    """A buffer of outcomes and the one task that writes them with `write` (a blocking function that
    records a group in its own transaction; it runs in a worker thread)."""

    def __init__(
        self,
        write: Callable[[Sequence[Outcome]], None],
        *,
        group_size: int = GROUP_SIZE,
        interval: float = FLUSH_INTERVAL,
        limit: int = UNRECORDED_LIMIT,
    ) -> None:
        self._write = write
        self._group_size = group_size
        self._interval = interval
        self._limit = limit
        self._pending: list[Outcome] = []
        # Emails admitted and not yet recorded (see admit), and how many of the pending outcomes hold one.
        self._open = 0
        self._pending_places = 0
        # Whether a group is being written now.
        self._writing = False
        self._added = 0
        self._written = 0
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._full = asyncio.Event()
        # Set while fewer than `limit` emails are admitted and unrecorded (see admit).
        self._room = asyncio.Event()
        self._room.set()
        self._progress = asyncio.Condition()
        self._writer: asyncio.Task[None] | None = None

    def place(self) -> Place:
        """An email's place, not taken yet: the transport takes it (Transport.send's `admit`)."""
        return Place(self)

    async def admit(self) -> None:
        """Wait for a place and take it: the transport calls it (through a Place) right before an
        email's first byte goes to the relay, and the email's outcome (`add`) gives it back once
        written. A sender waits only while a write under way or to come will free places (else every
        place is held by emails on connections, which need no place to finish: waiting could only
        stop them); while it waits and no group is being written, what is pending is written at once
        rather than when its group fills or its interval ends."""
        self._bind_to_running_loop()  # before counting: a new loop starts the count afresh
        while self._open >= self._limit and (self._pending or self._writing):
            if not self._writing:
                # No write under way will free places: what is pending goes now. (During a write, more
                # outcomes gather for the next group, and writes stay few.)
                self._full.set()
            self._room.clear()
            await self._room.wait()
        self._open += 1

    def release(self, place: Place) -> None:
        """The place of an email that leaves no outcome (its sender was cancelled) is free at once."""
        if place.taken:
            place.taken = False
            self._open -= 1
            self._room.set()

    def add(self, outcome: Outcome, place: Place | None = None) -> None:
        """An email's outcome; the place it took, if it took one, is free once the outcome is written."""
        # Bound to the running loop only when a writer starts: while one runs, it runs on this loop
        # (asyncio.run ends by cancelling the tasks left), and add and admit are called once an email.
        if self._writer is None or self._writer.done():
            self._bind_to_running_loop()
            self._writer = asyncio.get_running_loop().create_task(self._write_while_pending())
        self._pending.append(outcome)
        if place is not None and place.taken:
            self._pending_places += 1
        self._added += 1
        if len(self._pending) >= self._group_size:
            self._full.set()

    async def flush(self) -> None:
        """Wait until every outcome added so far is written. Raises what a failed write raised: those
        outcomes are not recorded, and their rows go back to the queue when the claim's lease ends."""
        self._bind_to_running_loop()
        target = self._added
        if self._pending:
            self._full.set()  # the filling group goes now, not when its interval ends
        async with self._progress:
            await self._progress.wait_for(lambda: self._written >= target)
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _bind_to_running_loop(self) -> None:
        # asyncio's primitives belong to the loop that first waits on them; a worker driven by several
        # asyncio.run() calls in turn (tests, `--once`) gets fresh ones in each, between batches.
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._full = asyncio.Event()
            self._room = asyncio.Event()
            self._room.set()
            self._progress = asyncio.Condition()
            self._writer = None
            # The senders of an earlier loop are gone; what they left pending still holds its places.
            self._open = self._pending_places

    async def _write_while_pending(self) -> None:
        while self._pending:
            if len(self._pending) < self._group_size:
                # Woken early when the group fills; otherwise its oldest outcome has waited long enough.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self._interval)
            self._full.clear()
            group, self._pending = self._pending, []
            places, self._pending_places = self._pending_places, 0
            self._writing = True
            try:
                await asyncio.to_thread(self._write, group)
            except Exception as exc:
                log.exception("could not record %d send outcomes", len(group))
                self._error = exc
            finally:
                self._writing = False
            self._written += len(group)
            self._open -= places
            self._room.set()
            async with self._progress:
                self._progress.notify_all()
