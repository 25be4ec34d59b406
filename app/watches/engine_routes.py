"""GET /v1/engines: each registered engine, whether it can run now, and if not why and what to do."""

from __future__ import annotations

from fastapi import Request, Response

from app.identity.dependencies import V1User
from app.kit.responses import json_response
from app.kit.v1_routing import V1Router
from app.watches.dependencies import request_engines
from app.watches.wire import EngineListResponse

router = V1Router(tags=["Engines"])


@router.get(
    "/v1/engines",
    response_model=EngineListResponse,
    summary="The engines and whether each can run",
    description="Always 200: an engine that cannot run says why in `unreachable_reason` and what to do "
    "in `how_to_fix`. What an engine's endpoint answers is re-checked at most every 10 s.",
)
async def list_engines(request: Request, principal: V1User) -> Response:
    return json_response({"items": await request_engines(request).statuses()})
