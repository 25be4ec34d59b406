"""GET /healthz: liveness and database reachability."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from app.db import ping
from app.kit.release import installed_version
from app.request_sessions import SessionDep

health_router = APIRouter(include_in_schema=False)


@health_router.get("/healthz")
def healthz(session: SessionDep) -> JSONResponse:
    try:
        ping(session)
    except SQLAlchemyError as exc:
        return JSONResponse(
            {"status": "error", "database": type(exc).__name__, "version": installed_version()},
            status_code=503,
        )
    # `version` as openmagpie's /healthz has it (its `magpie version` reads it), on a 503 too.
    return JSONResponse({"status": "ok", "database": "ok", "version": installed_version()})
