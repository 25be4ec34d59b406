"""What a background job is, for every domain: `Job`, and `JobSet`, one domain's jobs with what they
share. Each domain's `jobs.py` makes its JobSet; app/scheduler.py runs them (docs/architecture.md)."""

from __future__ import annotations

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


class JobSet:
    """One domain's jobs and what they share (a worker, an HTTP client, a transport), made once per
    process. The defaults suit jobs that hold nothing."""

    def jobs(self) -> list[Job]:
        raise NotImplementedError

    def stopping(self) -> None:
        """A graceful stop begins: start no new work (the jobs that finish on stop end their round)."""

    async def aclose(self) -> None:
        """Release what the jobs share, once they have stopped."""
