"""Start-up objects moved out of the cyclic garbage collector's sight, once a process is ready; and no
collections while it starts."""

from __future__ import annotations

import gc


def pause_collections() -> None:
    """No cyclic collections until `freeze_start_up_objects` or `resume_collections`.

    Start-up (imports, mapped models, pydantic schemas, the scheduler's jobs) makes some 170,000
    long-lived objects and next to no garbage, and the collector's passes over a heap that keeps growing
    took 0.37 to 0.45 s of the 2.8 to 3.2 s of CPU that `tidings worker`'s imports take (387
    collections, timed by gc.callbacks on 2026-11-27): about 8 us an email of a 50,000-email send's
    worker CPU."""
    gc.disable()


def resume_collections() -> None:
    gc.enable()


def freeze_start_up_objects() -> None:
    """After start-up, put every live object in the collector's permanent generation, and collect as
    usual from then on.

    A served process holds some 170,000 long-lived objects (modules, routes, models, schemas). Each
    full collection walked them all, 50 to 120 ms with the event loop stopped, which set the p99 of
    every route (tests/benchmarks/api.py: GET /contacts?page=500 p99 77 ms with the scheduler on, at a
    p50 of 23 ms). Frozen, they are never scanned; objects made later are collected as before.

    No collection first (Python's documented recipe: gc.freeze() alone): the one that used to come first
    walked all of them once more, 148 ms of `tidings worker`'s start-up, to find some 2,400 unreachable
    objects (on 2026-11-27, after its imports, migration check and jobs' start, the collector paused);
    those stay frozen, well under a megabyte, once.
    """
    gc.freeze()
    resume_collections()
