"""/v1/feeds and /v1/feeds/{id}/sources: thin routes over feed_service."""

from __future__ import annotations

from typing import Any

from fastapi import Response

from app.app_state import SettingsDep
from app.feeds import feed_service
from app.feeds.specs import FeedEdit, FeedInput, FeedPatch, SourceInput, SourceSetPayload, source_inputs
from app.feeds.wire import (
    FeedListResponse,
    FeedMutationResponse,
    FeedView,
    SourceSetOut,
    SourceSetResult,
)
from app.identity.dependencies import V1User
from app.kit.openapi import request_body, schema_ref
from app.kit.responses import json_response
from app.kit.time import utcnow
from app.kit.v1_input import validate
from app.kit.v1_request import DryRun, JsonBody, PageCursor
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.request_sessions import SessionDep

router = V1Router(tags=["Feeds"])

INVALID: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Invalid input; `detail` names each field"}
}
MISSING: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No such feed in the account"}
}
DRY_RUN_NOTE = " With `?dry_run=true` (1, true, yes, on) everything is validated and nothing is stored."


@router.get("/v1/feeds", response_model=FeedListResponse, summary="List feeds, newest first")
def list_feeds(session: SessionDep, principal: V1User, cursor: PageCursor) -> FeedListResponse:
    return feed_service.list_feeds(session, principal.account.id, cursor)


@router.post(
    "/v1/feeds",
    openapi_extra=request_body(FeedInput),
    response_model=FeedMutationResponse,
    status_code=201,
    summary="Create a feed",
    description="201 with the feed; a dry run answers 200 with `id` null." + DRY_RUN_NOTE,
    responses={200: {"model": FeedMutationResponse, "description": "Dry run"}, **INVALID},
)
def create_feed(
    settings: SettingsDep,
    response: Response,
    session: SessionDep,
    principal: V1User,
    body: JsonBody,
    dry_run: DryRun,
) -> FeedMutationResponse:
    feed_input = validate(FeedInput, body)
    if dry_run:
        response.status_code = 200
    return feed_service.create_feed(
        session,
        principal,
        feed_input,
        dry_run=dry_run,
        allow_private=settings.outbound_allow_private,
        now=utcnow(),
    )


@router.get(
    "/v1/feeds/{feed_id}", response_model=FeedView, summary="A feed with its sources", responses=MISSING
)
def get_feed(feed_id: str, session: SessionDep, principal: V1User) -> FeedView:
    return feed_service.read_feed(session, principal.account.id, feed_id)


@router.put(
    "/v1/feeds/{feed_id}",
    openapi_extra=request_body(FeedInput),
    response_model=FeedMutationResponse,
    summary="Edit a feed",
    description="Replaces the feed's settings; `sources`, when given with entries, replaces its sources "
    "by diff (absent or empty, the sources are left alone). "
    "Changing `kind` is 409 `kind_immutable`." + DRY_RUN_NOTE,
    responses={**INVALID, **MISSING, 409: {"model": ErrorOut, "description": "`kind` cannot change"}},
)
def edit_feed(
    feed_id: str,
    settings: SettingsDep,
    session: SessionDep,
    principal: V1User,
    body: JsonBody,
    dry_run: DryRun,
) -> FeedMutationResponse:
    feed_input = validate(FeedEdit, body)
    return feed_service.edit_feed(
        session,
        principal,
        feed_id,
        feed_input,
        dry_run=dry_run,
        allow_private=settings.outbound_allow_private,
        now=utcnow(),
        min_poll_seconds=settings.feed_min_poll_seconds,
    )


@router.patch(
    "/v1/feeds/{feed_id}",
    openapi_extra=request_body(FeedPatch),
    response_model=FeedMutationResponse,
    summary="Pause or resume a feed (`is_active`)",
    description="A paused feed is not polled; resuming makes it due by its interval." + DRY_RUN_NOTE,
    responses={**INVALID, **MISSING},
)
def patch_feed(
    feed_id: str,
    settings: SettingsDep,
    session: SessionDep,
    principal: V1User,
    body: JsonBody,
    dry_run: DryRun,
) -> FeedMutationResponse:
    patch = validate(FeedPatch, body)
    return feed_service.set_active(
        session,
        principal,
        feed_id,
        patch.is_active,
        dry_run=dry_run,
        now=utcnow(),
        min_poll_seconds=settings.feed_min_poll_seconds,
    )


@router.delete(
    "/v1/feeds/{feed_id}",
    status_code=204,
    response_model=None,
    summary="Delete a feed with its sources and items",
    description="204; a dry run answers 200 with the feed that would be deleted.",
    responses={200: {"model": FeedMutationResponse, "description": "Dry run"}, **MISSING},
)
def delete_feed(feed_id: str, session: SessionDep, principal: V1User, dry_run: DryRun) -> Any:
    preview = feed_service.delete_feed(session, principal, feed_id, dry_run=dry_run)
    if preview is not None:
        return json_response(preview.model_dump(mode="json"))
    return Response(status_code=204)


@router.get(
    "/v1/feeds/{feed_id}/sources",
    response_model=SourceSetOut,
    summary="A feed's sources, in the format PUT and POST take back",
    responses=MISSING,
)
def get_sources(feed_id: str, session: SessionDep, principal: V1User) -> SourceSetOut:
    return feed_service.list_sources(session, principal.account.id, feed_id)


def _set_sources(
    feed_id: str,
    settings: SettingsDep,
    session: SessionDep,
    principal: V1User,
    body: JsonBody,
    dry_run: DryRun,
) -> SourceSetResult:
    payload = validate(SourceSetPayload, source_inputs(body))
    return feed_service.set_feed_sources(
        session,
        principal,
        feed_id,
        payload.sources,
        dry_run=dry_run or payload.dry_run,
        allow_private=settings.outbound_allow_private,
        now=utcnow(),
    )


SET_SOURCES_DOC = (
    'The body is a SourceSetPayload (`{version: "v1", sources}`) or a bare array of SourceInput. '
    "Sources whose spec is in both sets are kept (with their ids and watermarks), new ones are added, "
    "the rest removed. `dry_run: true` in the body is a dry run too." + DRY_RUN_NOTE
)
# Either shape: the payload, or its bare array of sources.
SOURCE_SET_SCHEMA = {
    "oneOf": [schema_ref(SourceSetPayload), {"type": "array", "items": schema_ref(SourceInput)}]
}
for _method in ("POST", "PUT"):
    router.add_api_route(
        "/v1/feeds/{feed_id}/sources",
        _set_sources,
        methods=[_method],
        response_model=SourceSetResult,
        summary="Replace a feed's sources by diff",
        description=SET_SOURCES_DOC,
        responses={**INVALID, **MISSING},
        operation_id=f"set_sources_{_method.lower()}",
        openapi_extra=request_body(SourceSetPayload, schema=SOURCE_SET_SCHEMA),
    )
