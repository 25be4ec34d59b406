"""The outcome recorder: groups of GROUP_SIZE or whatever waited FLUSH_INTERVAL, written in a worker
thread in order, nothing lost, failures reported to whoever flushes; on both loops the service runs
(`tidings serve` on uvloop, `tidings worker` on asyncio's own)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from app.mail.sending.queue import Outcome
from app.mail.sending.recorder import FLUSH_INTERVAL, GROUP_SIZE, OutcomeRecorder


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


def test_senders_wait_while_a_full_group_waits_behind_a_slow_write(run: Callable[..., Any]) -> None:
    """What is accepted and not yet recorded (sent again if the process dies) stays bounded however slow
    the database is: a full group waiting holds the senders back instead of growing with the wait."""
    database = Database(delay=0.05)
    recorder = OutcomeRecorder(database.write)
    senders, each = 8, 40

    async def send(first: int) -> None:
        for n in range(first, first + each):
            await recorder.room()
            await asyncio.sleep(0)  # on the wire
            recorder.add(outcome(n))

    async def scenario() -> None:
        await asyncio.gather(*(send(s * each) for s in range(senders)))
        await recorder.flush()

    run(scenario())
    assert sorted(n for group in database.groups for n in group) == list(range(senders * each))
    # A group is what filled while the one before it was written: at most a full group, plus one
    # outcome from each sender that had started its email before the group filled.
    assert max(len(group) for group in database.groups) <= GROUP_SIZE + senders
