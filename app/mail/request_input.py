"""The email API's request dependencies: its input read from the query string and the body (within
MAX_BODY_BYTES), a listing's paging, and the path ids. Apart from `app.mail.input`'s normalising and
validation, which the services and the jobs use without FastAPI."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Depends, Path, Request

from app.kit.body import BodyTooLarge, read_capped
from app.kit.pagination import Paging
from app.mail.common import MAX_ID
from app.mail.input import RawInput, TooDeep, nest_pairs, normalize

# A path id: out of range (or not an integer) is a 404, like any id that names nothing.
RowId = Annotated[int, Path(ge=1, le=MAX_ID)]

# A body larger than this is refused before parsing (the largest field, html, is 1,000,000 characters).
MAX_BODY_BYTES = 8 * 1024 * 1024


async def read_input(request: Request) -> RawInput:
    """Query string, then form or JSON body over it. A body that cannot be read is reported, not raised:
    the route decides the status (400 or 422) when it validates."""
    data: dict[str, Any] = nest_pairs(parse_qsl(request.url.query, keep_blank_values=True))
    if request.method in ("GET", "HEAD", "DELETE"):
        return RawInput(normalize(data))
    try:
        body = await read_capped(request, MAX_BODY_BYTES)
    except BodyTooLarge as exc:
        return RawInput(normalize(data), exc.message)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    problem = None
    if not body.strip():
        pass
    elif content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        try:
            form = await request.form()
        except Exception:
            problem = "The form body could not be read."
        else:
            pairs = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
            data.update(nest_pairs(pairs))
    elif content_type in ("", "application/json", "text/json") or content_type.endswith("+json"):
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            problem = "The request body is not valid JSON."
        else:
            if isinstance(parsed, dict):
                data.update(parsed)
            else:
                problem = "The request body must be a JSON object."
    else:
        problem = f"Unsupported content type {content_type!r}: send application/json or a form."
    try:
        return RawInput(normalize(data), problem)
    except TooDeep as exc:
        return RawInput({}, str(exc))


MailInput = Annotated[RawInput, Depends(read_input)]


async def paging_of(request: Request) -> Paging:
    """A listing's `?page=`, its URL without the query and the query: what its page links are made of.
    Async: reading the request needs no worker thread (a hot listing pays for none)."""
    return Paging(
        request.query_params.get("page"),
        str(request.base_url).rstrip("/") + request.url.path,
        dict(request.query_params),
    )


# The paging of a listing route, read from its request once; the services take the value.
PagingDep = Annotated[Paging, Depends(paging_of)]
