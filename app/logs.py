"""Logging: plain text by default, one JSON object a line with `TIDINGS_LOG_FORMAT=json`, and a request
id on every line logged while a request is being answered (taken from a sane `X-Request-ID`, else made
up, and echoed in the response's `X-Request-ID`)."""

from __future__ import annotations

import logging
import re
import secrets
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REQUEST_ID: ContextVar[str | None] = ContextVar("tidings_request_id", default=None)
SANE_REQUEST_ID = re.compile(rb"[A-Za-z0-9._-]{1,64}")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = REQUEST_ID.get()
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


def logging_config(log_format: str) -> dict[str, Any]:
    """A dictConfig for our loggers and uvicorn's (passed to uvicorn.run, or applied by `tidings worker`)."""
    formatter: dict[str, Any] = (
        {"()": "app.logs.JsonFormatter"} if log_format == "json" else {"format": TEXT_FORMAT}
    )
    handler = {"class": "logging.StreamHandler", "formatter": "default", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": "INFO"},
        "loggers": {
            "uvicorn": {"handlers": [], "level": "INFO", "propagate": True},
            "uvicorn.error": {"handlers": [], "level": "INFO", "propagate": True},
            "uvicorn.access": {"handlers": [], "level": "INFO", "propagate": True},
            # httpx logs every outbound request at INFO: a line per webhook delivery and feed fetch,
            # which the deliveries' own records already say better.
            "httpx": {"handlers": [], "level": "WARNING", "propagate": True},
        },
    }


class RequestIds:
    """Gives each request an id for the log lines it causes, and returns it as `X-Request-ID`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((value for name, value in scope["headers"] if name == b"x-request-id"), b"")
        request_id = given.decode() if SANE_REQUEST_ID.fullmatch(given) else secrets.token_hex(8)
        token = REQUEST_ID.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
