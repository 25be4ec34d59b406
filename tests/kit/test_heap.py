"""A served app freezes its start-up objects once its lifespan has begun (a test app never does)."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

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
