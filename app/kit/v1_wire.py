"""What every /v1 answer shares: the timestamp format and the error body `{error, detail}`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, PlainSerializer, WithJsonSchema

from app.kit.time import iso

# Every /v1 timestamp is written alike: UTC, six fractional digits, `Z`.
Timestamp = Annotated[
    datetime,
    PlainSerializer(iso, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class ErrorOut(BaseModel):
    error: str
    detail: Any = None
