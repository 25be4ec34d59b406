"""Fixtures of the kit tests: `run`, a coroutine on each event loop the service runs on."""

from tests.loops import run

__all__ = ["run"]
