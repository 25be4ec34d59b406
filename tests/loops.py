"""The event loops the service runs on, for tests that must pass on each: the `run` fixture runs a
coroutine on a new loop of the kind the test is parametrized with. A conftest imports it to offer it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest
import uvloop

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]

# The loops the service runs on: the standard library's (`tidings worker`, under asyncio.run) and
# uvloop (`tidings serve`: uvicorn picks it when installed, and uvicorn[standard] installs it). They
# differ in more than speed: uvloop's transports, for one, are not subclasses of asyncio.Transport.
LOOPS: dict[str, tuple[Callable[[], asyncio.AbstractEventLoop], type]] = {
    "asyncio": (asyncio.SelectorEventLoop, asyncio.SelectorEventLoop),
    "uvloop": (uvloop.new_event_loop, uvloop.Loop),
}


@pytest.fixture(params=list(LOOPS))
def run(request: pytest.FixtureRequest) -> Run[Any]:
    """Runs a coroutine to its end on a new event loop of the kind the test is parametrized with."""
    factory, kind = LOOPS[request.param]

    def run_on_loop(coroutine: Coroutine[Any, Any, T]) -> T:
        with asyncio.Runner(loop_factory=factory) as runner:
            assert type(runner.get_loop()) is kind
            return runner.run(coroutine)

    return run_on_loop
