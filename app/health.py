"""GET /healthz: liveness and database reachability."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from app.db import SessionDep, ping

health_router = APIRouter(include_in_schema=False)


@health_router.get("/healthz")
def healthz(session: SessionDep) -> JSONResponse:
    try:
        ping(session)
    except SQLAlchemyError as exc:
        return JSONResponse({"status": "error", "database": type(exc).__name__}, status_code=503)
    return JSONResponse({"status": "ok", "database": "ok"})
