"""kit.jobs.Lanes: while the queue is empty only the first lane polls it; the others wake when it finds
work, keep going while they find some, and a stop wakes them; a nudge (new work queued) ends the first
lane's sleep in the scheduler."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from app.config import Settings
from app.kit.jobs import Job, Lanes
from app.scheduler import Scheduler


class Queue:
    """A queue of `items` that each round takes one from, counting the rounds (the claims)."""

    def __init__(self) -> None:
        self.items = 0
        self.rounds = 0

    async def take(self) -> int:
        self.rounds += 1
        if not self.items:
            return 0
        self.items -= 1
        return 1


async def finished(coroutine: asyncio.Task[int], within: float = 0.05) -> bool:
    done, _ = await asyncio.wait([coroutine], timeout=within)
    return bool(done)


def test_the_lanes_are_named_and_numbered_and_finish_on_stop_when_asked() -> None:
    jobs = Lanes("send lane", 3, 0.5, Queue().take).jobs(finishes_on_stop=True)
    assert [job.name for job in jobs] == ["send lane 0", "send lane 1", "send lane 2"]
    assert {(job.interval, job.finishes_on_stop) for job in jobs} == {(0.5, True)}
    assert [job.name for job in Lanes("lane", 0, 1.0, Queue().take).jobs()] == ["lane 0"]


def test_an_empty_queue_is_polled_by_the_first_lane_alone() -> None:
    async def scenario() -> None:
        queue = Queue()
        lead, follower = (job.run for job in Lanes("lane", 2, 0.5, queue.take).jobs())
        assert await lead() == 0
        waiting = asyncio.create_task(follower())
        assert not await finished(waiting)
        assert queue.rounds == 1  # the follower has not claimed
        queue.items = 3
        assert await lead() == 1  # the first lane finds work: the follower wakes and claims too
        assert await finished(waiting)
        assert waiting.result() == 1
        assert queue.rounds == 3

    asyncio.run(scenario())


def test_a_lane_at_work_keeps_going_after_the_first_lane_finds_nothing() -> None:
    async def scenario() -> None:
        queue = Queue()
        lead, follower = (job.run for job in Lanes("lane", 2, 0.5, queue.take).jobs())
        queue.items = 2
        assert await lead() == 1
        assert await follower() == 1  # it found work...
        queue.items = 1
        assert await lead() == 1
        assert await lead() == 0  # ...so this empty round of the first lane does not put it to sleep
        queue.items = 1
        assert await asyncio.wait_for(follower(), 1) == 1
        assert await asyncio.wait_for(follower(), 1) == 0  # its own empty round
        sleeping = asyncio.create_task(follower())
        assert not await finished(sleeping)  # asleep until the first lane finds work again
        sleeping.cancel()

    asyncio.run(scenario())


def test_a_stop_wakes_the_sleeping_lanes() -> None:
    async def scenario() -> None:
        queue = Queue()
        lanes = Lanes("lane", 3, 0.5, queue.take)
        lead, *followers = (job.run for job in lanes.jobs(finishes_on_stop=True))
        assert await lead() == 0
        sleeping = [asyncio.create_task(follow()) for follow in followers]
        assert not await finished(sleeping[0])
        lanes.wake()
        assert [await asyncio.wait_for(task, 1) for task in sleeping] == [0, 0]

    asyncio.run(scenario())


def test_a_nudge_ends_the_first_lanes_sleep_and_is_not_lost_during_a_round(settings: Settings) -> None:
    """The scheduler sleeps a job an interval after a round that found nothing, unless its Job.wake is
    set (Lanes.nudge, by the fan-out): then the first lane claims at once. A nudge that comes while a
    round runs (the work was queued after the round looked) skips the sleep after it."""

    async def scenario() -> None:
        scheduler = Scheduler(settings, cast(Any, None))
        scheduler._stopping = asyncio.Event()
        queue = Queue()
        lanes = Lanes("lane", 2, 30.0, queue.take)
        lead = lanes.jobs()[0]
        looping = asyncio.create_task(scheduler._loop(lead))
        await asyncio.sleep(0.05)
        assert queue.rounds == 1  # nothing found: asleep for 30 s
        queue.items = 2
        lanes.nudge()
        await asyncio.sleep(0.05)
        assert (queue.items, queue.rounds) == (0, 4)  # woken: took both, then found nothing again
        looping.cancel()
        await asyncio.gather(looping, return_exceptions=True)

        arrived = asyncio.Event()

        async def late_work() -> int:
            # The work is queued, and the lane nudged, while this round is under way and finds nothing.
            queue.rounds += 1
            if queue.rounds == 5:
                queue.items = 1
                lanes.nudge()
                return 0
            arrived.set()
            return await queue.take()

        racing = asyncio.create_task(scheduler._loop(Job("racing", 30.0, late_work, wake=lead.wake)))
        await asyncio.wait_for(arrived.wait(), 1)  # the next round came at once, not after 30 s
        scheduler._stopping.set()
        racing.cancel()
        await asyncio.gather(racing, return_exceptions=True)

    asyncio.run(scenario())


def test_only_the_first_lane_is_nudged() -> None:
    jobs = Lanes("lane", 3, 0.5, Queue().take).jobs()
    assert jobs[0].wake is not None
    assert [job.wake for job in jobs[1:]] == [None, None]
