"""`tidings serve --workers N`: uvicorn's supervisor of the HTTP worker processes, saying why it
replaced one.

uvicorn logs the same "Child process [pid] died" whether a worker crashed, was killed from outside or
was killed by the supervisor itself for leaving its health check unanswered (a hung or overloaded
process). An operator who sees workers replaced needs to know which: the first is a bug, the last a
machine too busy for `--worker-timeout`. The supervisor's own loop stays uvicorn's; this only looks at
each replaced process once uvicorn has joined it.
"""

from __future__ import annotations

import contextlib
import logging
import signal

from uvicorn import Config
from uvicorn.supervisors.multiprocess import Multiprocess, Process

log = logging.getLogger("uvicorn.error")


def replacement_reason(exitcode: int | None, *, was_running: bool, timeout: float) -> str:
    """Why a worker process was replaced, from what its end left: `was_running` says whether it was
    still running when the supervisor pinged it (a process that had already ended was not killed by
    the supervisor)."""
    if was_running and exitcode == -signal.SIGKILL:
        return (
            f"it did not answer the health check within {timeout:g} s (hung, or the machine too busy: "
            "--worker-timeout sets the limit), so it was killed"
        )
    if exitcode is None:
        return "its end could not be read"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"it was ended by {name} from outside the supervisor"
    return f"it exited on its own with status {exitcode}"


class ExplainingSupervisor(Multiprocess):
    """uvicorn's Multiprocess, logging one WARNING with the reason for each worker it replaces."""

    def keep_subprocess_alive(self) -> None:
        before: list[tuple[Process, bool]] = [(p, p.process.is_alive()) for p in self.processes]
        super().keep_subprocess_alive()
        for (old, was_running), now in zip(before, self.processes, strict=True):
            if now is not old:
                reason = replacement_reason(
                    old.exitcode, was_running=was_running, timeout=self.config.timeout_worker_healthcheck
                )
                log.warning("HTTP worker process [%s] was replaced: %s.", old.pid, reason)


def run_supervised(config: Config) -> None:
    """What `uvicorn.run` does with several workers, with ExplainingSupervisor as the supervisor."""
    socket = config.bind_socket()
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the supervisor has stopped its workers
        ExplainingSupervisor(config, sockets=[socket]).run()
