"""The /v1 routes' request dependencies: the JSON body (read within MAX_BODY_BYTES), `?dry_run=` and the
page cursor (`?limit=`, `?after=`). Apart from `app.kit.v1_input`'s validation, which the services and
the jobs use without FastAPI."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import Depends, Request

from app.kit.body import BodyTooLarge, read_capped
from app.kit.flags import TRUE_WORDS
from app.kit.ids import normalize_ulid
from app.kit.v1_input import Cursor, invalid

MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


async def read_v1_body(request: Request) -> bytes:
    """The raw body, or 400 with `body` named past MAX_BODY_BYTES (counted while reading)."""
    try:
        return await read_capped(request, MAX_BODY_BYTES)
    except BodyTooLarge as exc:
        raise invalid({"body": [f"The body is larger than {MAX_BODY_BYTES} bytes."]}) from exc


async def read_json(request: Request) -> Any:
    """The request body as JSON (any JSON value), or 400 with `body` named."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and content_type != "application/json" and not content_type.endswith("+json"):
        raise invalid({"body": [f"Unsupported content type {content_type!r}: send application/json."]})
    body = await read_v1_body(request)
    if not body.strip():
        raise invalid({"body": ["A JSON body is required."]})
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise invalid({"body": ["The body is not valid JSON."]}) from exc


JsonBody = Annotated[Any, Depends(read_json)]


def is_dry_run(request: Request) -> bool:
    """`?dry_run=` is true for 1, true, yes and on (any case); anything else, or absent, is false."""
    return request.query_params.get("dry_run", "").strip().lower() in TRUE_WORDS


DryRun = Annotated[bool, Depends(is_dry_run)]


def read_cursor(request: Request) -> Cursor:
    """`?limit=` (default 50, at most 200; a value that is not a positive integer means the default)
    and `?after=` (an id from `next_cursor`; anything that is not an id is 400)."""
    raw_limit = request.query_params.get("limit", "").strip()
    limit = int(raw_limit) if raw_limit.isdigit() and len(raw_limit) < 10 else DEFAULT_LIMIT
    limit = min(limit, MAX_LIMIT) if limit >= 1 else DEFAULT_LIMIT
    raw_after = request.query_params.get("after")
    after = None
    if raw_after:
        after = normalize_ulid(raw_after.strip())
        if after is None:
            raise invalid({"after": ["Must be an id from a previous page's next_cursor."]})
    return Cursor(limit=limit, after=after)


PageCursor = Annotated[Cursor, Depends(read_cursor)]
