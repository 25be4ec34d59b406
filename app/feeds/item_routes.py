"""GET /v1/feeds/{id}/items and GET /v1/feed-items/{id} (the queries are in item_service.py)."""

from __future__ import annotations

from fastapi import Response

from app.feeds.item_service import item_page, read_item
from app.feeds.wire import FeedItemListResponse, FeedItemWire
from app.identity.dependencies import V1User
from app.kit.responses import timestamped_json_response
from app.kit.v1_request import PageCursor
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.request_sessions import SessionDep

router = V1Router(tags=["Feeds"])


@router.get(
    "/v1/feeds/{feed_id}/items",
    summary="A feed's items, newest first",
    description="`?limit=` (default 50, at most 200) and `?after=` (the previous page's `next_cursor`); "
    "`next_cursor` is null when the page is not full.",
    response_model=FeedItemListResponse,
    responses={404: {"model": ErrorOut, "description": "No such feed in the account"}},
)
def list_items(feed_id: str, session: SessionDep, principal: V1User, cursor: PageCursor) -> Response:
    # Models built from rows without validation, written by orjson: no model round trip per item.
    return timestamped_json_response(item_page(session, principal.account.id, feed_id, cursor))


@router.get(
    "/v1/feed-items/{item_id}",
    summary="One feed item by its own id",
    response_model=FeedItemWire,
    responses={404: {"model": ErrorOut, "description": "No such item in the account"}},
)
def get_item(item_id: str, session: SessionDep, principal: V1User) -> Response:
    return timestamped_json_response(read_item(session, principal.account.id, item_id))
