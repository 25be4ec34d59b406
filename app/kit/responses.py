"""JSON responses written with orjson, for the listing routes whose rows are already plain values."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import Response


def json_response(content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(content), status_code=status_code, headers=headers, media_type="application/json"
    )
