"""`tidings serve --workers 2` says why it replaced an HTTP worker process (uvicorn alone logs "Child
process [pid] died" for every cause): one that stopped answering the supervisor's health check, and
one ended from outside."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from app.http_supervisor import replacement_reason
from tests.processes import Running, environment, free_port, running, tidings_script


def test_a_killed_hung_worker_is_told_apart_from_a_crash_and_an_outside_signal() -> None:
    assert replacement_reason(-signal.SIGKILL, was_running=True, timeout=30).startswith(
        "it did not answer the health check within 30 s"
    )
    # A process that had already ended when it was pinged was not killed by the supervisor.
    assert replacement_reason(-signal.SIGKILL, was_running=False, timeout=30) == (
        "it was ended by SIGKILL from outside the supervisor"
    )
    assert replacement_reason(-signal.SIGABRT, was_running=True, timeout=30) == (
        "it was ended by SIGABRT from outside the supervisor"
    )
    assert replacement_reason(3, was_running=True, timeout=30) == "it exited on its own with status 3"
    assert replacement_reason(None, was_running=True, timeout=30) == "its end could not be read"


def _workers(served: Running) -> list[int]:
    """The supervisor's HTTP worker processes (its spawned children, not multiprocessing's resource
    tracker)."""
    parent = served.process.pid
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [int(pid) for pid in children if "spawn_main" in _cmdline(int(pid))]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return ""


def _wait_for(served: Running, text: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while text not in served.output():
        if time.monotonic() > deadline:
            pytest.fail(f"{text!r} not logged:\n{served.tail()}")
        time.sleep(0.2)


def _two_workers(served: Running) -> list[int]:
    deadline = time.monotonic() + 60
    while len(workers := _workers(served)) < 2:
        if time.monotonic() > deadline:
            pytest.fail(f"two workers did not start: {workers}\n{served.tail()}")
        time.sleep(0.2)
    return workers


def test_serve_logs_why_it_replaced_a_worker(database_url: str, tmp_path: Path) -> None:
    """At the default --worker-timeout (30 s: a loaded machine's workers take many seconds to start, and
    a shorter limit replaced them before they had), so this test takes about a minute."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [tidings_script(), "serve", "--port", str(port), "--workers", "2", "--no-scheduler"]
    env = environment(database_url, tmp_path / "var", base)
    with running(command, env, tmp_path / "serve.log", base, start_seconds=120) as served:
        hung, other = _two_workers(served)
        os.kill(hung, signal.SIGSTOP)  # alive, but answers nothing: the supervisor kills it after 30 s
        os.kill(other, signal.SIGABRT)
        _wait_for(served, f"HTTP worker process [{other}] was replaced: it was ended by SIGABRT")
        _wait_for(served, f"HTTP worker process [{hung}] was replaced: it did not answer the health check")
