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


def row_fields(model: type[BaseModel], row: object, **overrides: Any) -> dict[str, Any]:
    """The values of `model`'s fields, each read from `row`'s attribute of the same name but those in
    `overrides`: a row-to-wire builder names only what the wire says differently from the row."""
    return {name: overrides[name] if name in overrides else getattr(row, name) for name in model.model_fields}
