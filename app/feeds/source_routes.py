"""/v1/feed-sources/{id} (one source by its own id) and the watermark seeks: thin routes over
feed_service."""

from __future__ import annotations

from typing import Any

from fastapi import Response

from app.feeds import feed_service
from app.feeds.specs import SeekInput
from app.feeds.wire import SourceSeekResult, SourceWire
from app.identity.dependencies import V1User
from app.kit.openapi import request_body
from app.kit.responses import json_response
from app.kit.time import utcnow
from app.kit.v1_input import validate
from app.kit.v1_request import DryRun, JsonBody
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.request_sessions import SessionDep

router = V1Router(tags=["Feeds"])

INVALID: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Invalid input; `detail` names each field"}
}
NO_SOURCE: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No such source in the account"}
}
SEEK_DOC = (
    "`to` is `now`, `today`, `yesterday`, `this-week` (00:00 UTC), `oldest` (the start of the feed's "
    "retention window), a duration back from now (`7d`, `24h`, `30m`) or an ISO 8601 date-time; neither "
    "the future nor a moment before the retention window. The next poll collects from there. "
    "`dry_run` (in the body, or `?dry_run=`) counts without moving anything and is echoed."
)


@router.get(
    "/v1/feed-sources/{source_id}",
    response_model=SourceWire,
    summary="One source by its own id",
    responses=NO_SOURCE,
)
def get_source(source_id: str, session: SessionDep, principal: V1User) -> SourceWire:
    return feed_service.read_source(session, principal.account.id, source_id)


@router.delete(
    "/v1/feed-sources/{source_id}",
    status_code=204,
    response_model=None,
    summary="Remove one source from its feed (its items stay)",
    description="204; a dry run answers 200 with the source that would be removed.",
    responses={200: {"model": SourceWire, "description": "Dry run"}, **NO_SOURCE},
)
def delete_source(source_id: str, session: SessionDep, principal: V1User, dry_run: DryRun) -> Any:
    if dry_run:
        preview = feed_service.read_source(session, principal.account.id, source_id)
        return json_response(preview.model_dump(mode="json"))
    feed_service.delete_source(session, principal.account.id, source_id)
    return Response(status_code=204)


@router.post(
    "/v1/feed-sources/{source_id}/seek",
    openapi_extra=request_body(SeekInput),
    response_model=SourceSeekResult,
    summary="Move one source's watermark",
    description=SEEK_DOC,
    responses={**INVALID, **NO_SOURCE},
)
def seek_source(
    source_id: str, session: SessionDep, principal: V1User, body: JsonBody, dry_run: DryRun
) -> SourceSeekResult:
    seek = validate(SeekInput, body)
    return feed_service.seek_one_source(
        session, principal.account.id, source_id, seek.to, dry_run=dry_run or seek.dry_run, now=utcnow()
    )


@router.post(
    "/v1/feeds/{feed_id}/sources/seek",
    openapi_extra=request_body(SeekInput),
    response_model=SourceSeekResult,
    summary="Move the watermark of every source of a feed",
    description=SEEK_DOC,
    responses={**INVALID, 404: {"model": ErrorOut, "description": "No such feed in the account"}},
)
def seek_feed_sources(
    feed_id: str, session: SessionDep, principal: V1User, body: JsonBody, dry_run: DryRun
) -> SourceSeekResult:
    seek = validate(SeekInput, body)
    return feed_service.seek_feed_sources(
        session, principal.account.id, feed_id, seek.to, dry_run=dry_run or seek.dry_run, now=utcnow()
    )
