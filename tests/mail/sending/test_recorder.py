"""The outcome recorder: groups of GROUP_SIZE or whatever waited FLUSH_INTERVAL, written in a worker
thread in order, nothing lost, failures reported to whoever flushes, never more than UNRECORDED_LIMIT
emails admitted and unrecorded; on both loops the service runs (`tidings serve` on uvloop, `tidings
worker` on asyncio's own)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from app.mail.sending.queue import Outcome
from app.mail.sending.recorder import FLUSH_INTERVAL, GROUP_SIZE, UNRECORDED_LIMIT, OutcomeRecorder


def outcome(n: int) -> Outcome:
    return Outcome(n, 1, n, 1, "sent", message_id=f"<{n}@test>")


class Database:
    """Stands in for the transaction that records a group: remembers each group and its thread."""

    def __init__(self, delay: float = 0.0, fail_first: int = 0) -> None:
        self.groups: list[list[int]] = []
        self.threads: set[int] = set()
        self.delay = delay
        self.fail_first = fail_first
        self.writing = False
        self.overlapped = False

    def write(self, group: Sequence[Outcome]) -> None:
        self.overlapped |= self.writing
        self.writing = True
        self.threads.add(threading.get_ident())
        time.sleep(self.delay)
        self.writing = False
        if self.fail_first > 0:
            self.fail_first -= 1
            raise RuntimeError("the database went away")
        self.groups.append([o.deliverable_id for o in group])


def test_a_full_group_is_written_at_once(run: Callable[..., Any]) -> None:
    database = Database()
    recorder = OutcomeRecorder(database.write, interval=30)  # the timer never fires in this test

    async def scenario() -> float:
        started = time.monotonic()
        for n in range(GROUP_SIZE):
            recorder.add(outcome(n))
        await recorder.flush()
        return time.monotonic() - started

    assert run(scenario()) < 5
    assert database.groups == [list(range(GROUP_SIZE))]
    assert threading.get_ident() not in database.threads  # off the event loop's thread


def test_a_small_group_is_written_after_the_interval(run: Callable[..., Any]) -> None:
    database = Database()
    recorder = OutcomeRecorder(database.write)

    async def scenario() -> list[list[int]]:
        for n in range(3):
            recorder.add(outcome(n))
        await asyncio.sleep(FLUSH_INTERVAL * 20)  # nobody flushes: the timer alone writes them
        return list(database.groups)

    assert run(scenario()) == [[0, 1, 2]]


def test_what_comes_during_a_write_goes_in_the_next_group_in_order_and_nothing_is_lost(
    run: Callable[..., Any],
) -> None:
    database = Database(delay=0.005)
    recorder = OutcomeRecorder(database.write)
    producers, each = 8, 250

    async def produce(first: int) -> None:
        for n in range(first, first + each):
            recorder.add(outcome(n))
            if n % 7 == 0:
                await asyncio.sleep(0)

    async def scenario() -> None:
        await asyncio.gather(*(produce(p * each) for p in range(producers)))
        await recorder.flush()

    run(scenario())
    written = [n for group in database.groups for n in group]
    assert sorted(written) == list(range(producers * each))
    assert len(written) == len(set(written))
    for p in range(producers):  # each producer's outcomes are written in the order it added them
        mine = [n for n in written if p * each <= n < (p + 1) * each]
        assert mine == sorted(mine)
    # Writes are never concurrent, and groups grow while a write is slow rather than queueing.
    assert not database.overlapped
    assert len(database.groups) < producers * each / GROUP_SIZE


def test_a_failed_write_is_raised_to_the_flusher_and_later_groups_still_go(run: Callable[..., Any]) -> None:
    database = Database(fail_first=1)
    recorder = OutcomeRecorder(database.write)

    async def scenario() -> None:
        recorder.add(outcome(1))
        with pytest.raises(RuntimeError, match="went away"):
            await recorder.flush()
        recorder.add(outcome(2))
        await recorder.flush()  # the error was reported once

    run(scenario())
    assert database.groups == [[2]]


def test_one_recorder_serves_one_loop_after_another(run: Callable[..., Any]) -> None:
    database = Database()
    recorder = OutcomeRecorder(database.write)

    async def one_round(n: int) -> None:
        recorder.add(outcome(n))
        await recorder.flush()

    run(one_round(1))
    run(one_round(2))
    assert database.groups == [[1], [2]]


class Senders:
    """Senders as the worker's are, with the transport's part: a place taken before each email goes on
    the wire (twice, now and then, as a retry on another connection does), a moment there, its outcome;
    now and then an email that never reached the wire (a refused connection) and took none. Counts the
    most emails ever holding a place and not yet written, which is what a kill -9 could leave sent
    twice."""

    def __init__(self, recorder: OutcomeRecorder, database: Database) -> None:
        self.recorder = recorder
        self.database = database
        self.placed: set[int] = set()
        self.most_unrecorded = 0

    async def send(self, numbers: range, unplaced_every: int = 0) -> None:
        for n in numbers:
            place = self.recorder.place()
            if not (unplaced_every and n % unplaced_every == 0):
                await place()
                await place()  # a retry: no second place
                self.placed.add(n)
                written = {m for group in self.database.groups for m in group}
                self.most_unrecorded = max(self.most_unrecorded, len(self.placed - written))
                await asyncio.sleep(0)  # on the wire
            self.recorder.add(outcome(n), place)


def test_no_more_emails_than_the_limit_are_ever_unrecorded_however_slow_the_database(
    run: Callable[..., Any],
) -> None:
    """Thirty-two senders (four lanes of eight) and a database taking 50 ms a write: what holds a place
    and is not yet recorded never passes the limit, and the senders wait rather than the groups growing.
    Outcomes without a place (never on the wire) free none."""
    database = Database(delay=0.05)
    recorder = OutcomeRecorder(database.write, limit=UNRECORDED_LIMIT)
    senders, each = 32, 30
    counting = Senders(recorder, database)

    async def scenario() -> None:
        await asyncio.gather(*(counting.send(range(s * each, (s + 1) * each), 9) for s in range(senders)))
        await recorder.flush()

    run(scenario())
    assert sorted(n for group in database.groups for n in group) == list(range(senders * each))
    assert counting.most_unrecorded == UNRECORDED_LIMIT  # reached, never passed
    assert max(len(group) for group in database.groups) <= UNRECORDED_LIMIT + senders


def test_a_sender_waiting_for_a_place_has_the_pending_outcomes_written_at_once(
    run: Callable[..., Any],
) -> None:
    """A small limit fills long before a group would (or its interval end): the outcomes holding the
    places are written at once, not after FLUSH_INTERVAL."""
    database = Database()
    recorder = OutcomeRecorder(database.write, interval=30, limit=3)  # the timer never fires here
    counting = Senders(recorder, database)

    async def scenario() -> float:
        started = time.monotonic()
        await counting.send(range(12))
        await recorder.flush()
        return time.monotonic() - started

    assert run(scenario()) < 5
    assert sorted(n for group in database.groups for n in group) == list(range(12))
    assert counting.most_unrecorded == 3


def test_no_sender_waits_when_every_place_is_on_the_wire(run: Callable[..., Any]) -> None:
    """When every place is held by emails on connections (nothing pending, nothing being written), no
    write can free one: the next email is not held back (on the wire, its content may be what those
    emails wait for), so a transport with more connections than places cannot stall."""
    database = Database()
    recorder = OutcomeRecorder(database.write, limit=2)

    async def scenario() -> None:
        first, second, third = recorder.place(), recorder.place(), recorder.place()
        await first()
        await second()
        await asyncio.wait_for(third(), 5)
        for n, place in enumerate((first, second, third)):
            recorder.add(outcome(n), place)
        await recorder.flush()

    run(scenario())
    assert sorted(n for group in database.groups for n in group) == [0, 1, 2]


def test_a_released_place_is_free_at_once(run: Callable[..., Any]) -> None:
    database = Database()
    recorder = OutcomeRecorder(database.write, interval=30, limit=1)

    async def scenario() -> None:
        first = recorder.place()
        await first()
        recorder.add(outcome(0))  # pending, holding no place: the limit waits on a write now
        recorder.release(first)
        second = recorder.place()
        await asyncio.wait_for(second(), 5)
        recorder.add(outcome(1), second)
        await recorder.flush()

    run(scenario())
    assert sorted(n for group in database.groups for n in group) == [0, 1]


def test_places_are_counted_afresh_on_each_loop(run: Callable[..., Any]) -> None:
    """A worker driven by one asyncio.run after another (tests, `--once`): an email that took a place on
    a loop that ended without its outcome does not hold it on the next."""
    database = Database()
    recorder = OutcomeRecorder(database.write, limit=2)

    async def take_and_leave() -> None:
        await recorder.place()()
        await recorder.place()()

    async def one_more() -> None:
        recorder.add(outcome(0))  # something pending, so that a full count would make it wait
        place = recorder.place()
        await asyncio.wait_for(place(), 5)
        recorder.add(outcome(1), place)
        await recorder.flush()

    run(take_and_leave())
    run(one_more())
    assert sorted(n for group in database.groups for n in group) == [0, 1]
