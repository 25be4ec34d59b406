"""The one way request bodies are read: counted while they arrive and refused as soon as they pass the
route's cap, whether the client declared a Content-Length or sent the body in chunks.

Starlette's `request.body()` holds the whole body before anyone can look at its size, so a chunked
body of any size would sit in memory first; every route that takes a body reads it here instead. What
was read is kept where Starlette keeps it, so `request.form()` and `request.body()` afterwards parse
the same bytes without reading the stream again.
"""

from __future__ import annotations

from starlette.requests import Request

from app.kit.errors import DomainError


class BodyTooLarge(DomainError):
    """413: the body passed `limit` bytes. Readers whose interface words it otherwise (the /v1 400,
    better-auth's PAYLOAD_TOO_LARGE) catch it and raise their own."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than {limit} bytes.", code="payload_too_large")
        self.limit = limit


async def read_capped(request: Request, limit: int) -> bytes:
    """The request's body, at most `limit` bytes; BodyTooLarge as soon as the declared length or the
    bytes read so far pass it (what was read until then is dropped, the rest never read)."""
    kept: bytes | None = getattr(request, "_body", None)
    if kept is not None:
        if len(kept) > limit:
            raise BodyTooLarge(limit)
        return kept
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    body = b"".join(chunks)
    # Where Request.body() keeps what it read: later reads (form parsing) take these bytes.
    request._body = body
    return body
