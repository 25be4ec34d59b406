"""The `tidings` command's entry point: app.cli's imports (most of a command's start-up CPU) run with the
cyclic collector paused (app/kit/heap.py), then it runs as usual. The worker pauses it again for its
own start-up, until it is ready (app.cli.worker)."""

from __future__ import annotations

from app.kit.heap import pause_collections, resume_collections


def main() -> None:
    pause_collections()
    try:
        from app.cli import main as run_command
    finally:
        resume_collections()
    run_command()
