"""The benchmark's yardstick: a bare FastAPI app with one async endpoint returning a constant JSON.

Served exactly like Tidings (one uvicorn worker, same flags), it tells what this machine, uvicorn and
FastAPI can do at all, so the figures for Tidings can be read as a fraction of that:

    python -m uvicorn tests.benchmarks.reference_app:create_app --factory --workers 1 --port 8001
"""

from __future__ import annotations

from fastapi import FastAPI

BODY = {"status": "ok", "service": "reference"}


def create_app() -> FastAPI:
    app = FastAPI(title="Reference")

    @app.get("/")
    async def root() -> dict[str, str]:
        return BODY

    return app
