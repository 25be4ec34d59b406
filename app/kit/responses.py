"""JSON responses written with orjson, for the listing routes whose rows are already plain values."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from fastapi.responses import Response
from pydantic import BaseModel

from app.kit.time import iso


def json_response(content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(content), status_code=status_code, headers=headers, media_type="application/json"
    )


def _iso_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, BaseModel):
        # A wire model built from rows (`model_construct`, no validation): its fields as they were
        # given, in the model's order, written by orjson like the rest.
        return value.__dict__
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def timestamped_json_response(content: Any, status_code: int = 200) -> Response:
    """`json_response` for content that holds datetimes or wire models: each datetime written as the
    APIs write timestamps (UTC, six fractional digits, `Z`) rather than orjson's own RFC 3339 form."""
    body = orjson.dumps(content, default=_iso_default, option=orjson.OPT_PASSTHROUGH_DATETIME)
    return Response(body, status_code=status_code, media_type="application/json")
