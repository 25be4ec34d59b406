"""What a background job is, for every domain: `Job`, `JobSet` (one domain's jobs with what they
share) and `Lanes` (several jobs on one queue). Each domain's `jobs.py` makes its JobSet;
app/scheduler.py runs them (docs/architecture.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Job:
    """One loop of the scheduler: `run` again at once while it does work (returns more than 0), after
    `interval` seconds when it found nothing to do or raised."""

    name: str
    interval: float
    run: Callable[[], Awaitable[int]]
    # A graceful stop lets the round in progress finish (within the scheduler's grace) instead of
    # cancelling it: the send lanes record the emails on the wire.
    finishes_on_stop: bool = False
    # Set by whoever queues new work (Lanes.nudge): the job's sleep after a round that found nothing
    # ends at once, and a round under way when it is set is followed by another without a sleep.
    wake: asyncio.Event | None = None


class JobSet:
    """One domain's jobs and what they share (a worker, an HTTP client, a transport), made once per
    process. The defaults suit jobs that hold nothing."""

    def jobs(self) -> list[Job]:
        raise NotImplementedError

    def stopping(self) -> None:
        """A graceful stop begins: start no new work (the jobs that finish on stop end their round)."""

    async def aclose(self) -> None:
        """Release what the jobs share, once they have stopped."""


class Lanes:
    """Several loops taking work from one queue (the send lanes, events out's delivery lanes). While the
    queue is empty only the first lane polls it, every `interval`; the others sleep until it finds work,
    then take turns with it until each finds nothing again. Idle, a process polls a queue once an
    interval instead of once a lane an interval (each empty claim is a transaction: 0.5 to 2 ms of CPU),
    and the first work found starts every lane at once, so nothing waits longer than before."""

    def __init__(self, name: str, count: int, interval: float, run: Callable[[], Awaitable[int]]) -> None:
        self._name = name
        self._count = max(1, count)
        self._interval = interval
        self._run = run
        # Set while the first lane's last round found work (or a stop wakes the sleepers).
        self._found = asyncio.Event()
        # The first lane's Job.wake (nudge).
        self._nudged = asyncio.Event()

    def jobs(self, *, finishes_on_stop: bool = False) -> list[Job]:
        followers = [self._follower() for _ in range(1, self._count)]
        return [
            Job(f"{self._name} {n}", self._interval, run, finishes_on_stop, self._nudged if n == 0 else None)
            for n, run in enumerate([self._lead, *followers])
        ]

    def nudge(self) -> None:
        """Work was just queued (a campaign fanned out): the first lane claims now rather than at the end
        of its interval, and the others follow once it finds the work. Without it, the first emails of a
        campaign waited up to an interval (0.5 s for the send lanes) after the fan-out."""
        self._nudged.set()

    def wake(self) -> None:
        """Let the sleeping lanes run one round (a graceful stop: a lane that finishes on stop must
        return from its round, and its round does nothing once the work's owner is stopping)."""
        self._found.set()

    async def _lead(self) -> int:
        done = await self._run()
        if done:
            self._found.set()
        else:
            self._found.clear()
        return done

    def _follower(self) -> Callable[[], Awaitable[int]]:
        idle = True

        async def follow() -> int:
            nonlocal idle
            if idle:
                # Only after a round that found nothing: a lane at work keeps going however the first
                # lane's last round went.
                await self._found.wait()
            done = await self._run()
            idle = not done
            return done

        return follow
