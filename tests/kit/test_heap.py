"""A served app freezes its start-up objects once its lifespan has begun (a test app never does); the
`tidings` command and its worker start with the cyclic collector paused, and collect once running."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from app.kit.heap import freeze_start_up_objects

PROBE = textwrap.dedent(
    """
    import gc, sys
    from fastapi.testclient import TestClient
    from app.config import Settings
    from app.main import create_app

    settings = Settings(database_url="sqlite:///" + sys.argv[1], var_dir=sys.argv[2], scheduler=False)
    app = create_app(settings)
    before = gc.get_freeze_count()
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        print(before, gc.get_freeze_count())
    """
)


def test_a_served_app_freezes_what_it_holds_after_start_up(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "t.db"), str(tmp_path / "var")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    before, after = map(int, done.stdout.split())
    assert before == 0
    assert after > 10_000  # modules, routes and schemas: the bulk of a process's objects


def test_objects_made_after_the_freeze_are_still_collected() -> None:
    freeze_start_up_objects()
    try:
        frozen = gc.get_freeze_count()
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_the_command_runs_with_collections_on_after_its_imports(monkeypatch: Any) -> None:
    """app.launch pauses the collector for app.cli's imports only: a command runs with it on."""
    import app.cli
    from app import launch

    seen: list[bool] = []
    monkeypatch.setattr(app.cli, "main", lambda: seen.append(gc.isenabled()))
    launch.main()
    assert seen == [True]
    assert gc.isenabled()


WORKER_PROBE = textwrap.dedent(
    """
    import asyncio, gc, os, signal, sys
    from app.config import Settings
    from app.cli import _run_worker
    from app.cli_commands.common import migrate
    from app.kit.heap import pause_collections

    settings = Settings(database_url="sqlite:///" + sys.argv[1], var_dir=sys.argv[2], smtp_url="smtp://127.0.0.1:9")
    migrate(settings)
    once = sys.argv[3] == "once"

    async def stop_once_ready() -> None:
        # The worker collects again once its jobs are started: then it is told to stop.
        while not gc.isenabled():
            await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    async def run() -> None:
        pause_collections()  # as `tidings worker` does before it migrates
        if not once:
            asyncio.get_running_loop().create_task(stop_once_ready())
        await _run_worker(settings, once=once)

    asyncio.run(run())
    print(gc.isenabled(), gc.get_freeze_count())
    """
)


@pytest.mark.parametrize("mode", ["once", "serving"])
def test_a_worker_collects_again_once_it_is_ready(tmp_path: Path, mode: str) -> None:
    """`tidings worker` starts with the collector paused (app.cli.worker); running, it freezes what
    start-up made and collects as usual, and `--once` collects from its first batch on."""
    done = subprocess.run(
        [sys.executable, "-c", WORKER_PROBE, str(tmp_path / "t.db"), str(tmp_path / "var"), mode],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    enabled, frozen = done.stdout.split()[-2:]
    assert enabled == "True"
    assert int(frozen) > 10_000 if mode == "serving" else int(frozen) == 0
