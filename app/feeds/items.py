"""GET /v1/feeds/{id}/items: the feed's item log, newest first, by cursor."""

from __future__ import annotations

from typing import Any

from fastapi import Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db import SessionDep
from app.feeds.feed_service import find_feed
from app.feeds.wire import FeedItemListResponse
from app.identity.dependencies import V1User
from app.kit.responses import json_response
from app.kit.time import iso
from app.kit.v1_input import Cursor, PageCursor
from app.kit.v1_routing import V1Router
from app.kit.v1_wire import ErrorOut
from app.models import FeedItem

router = V1Router(tags=["Feeds"])

ITEM_COLUMNS = (
    FeedItem.id,
    FeedItem.source_kind,
    FeedItem.external_id,
    FeedItem.occurred_at,
    FeedItem.source_label,
    FeedItem.data,
)


def item_page(session: Session, account_id: int, feed_id: str, cursor: Cursor) -> dict[str, Any]:
    feed = find_feed(session, account_id, feed_id)
    query = select(*ITEM_COLUMNS).where(FeedItem.feed_id == feed.id)
    if cursor.after is not None:
        query = query.where(FeedItem.id < cursor.after)
    rows = session.execute(query.order_by(FeedItem.id.desc()).limit(cursor.limit)).all()
    items = [
        {
            "id": item_id,
            "source_kind": kind,
            "external_id": external_id,
            "occurred_at": iso(occurred_at),
            "source_label": label,
            "data": data,
        }
        for item_id, kind, external_id, occurred_at, label, data in rows
    ]
    next_cursor = items[-1]["id"] if len(items) == cursor.limit else None
    return {"items": items, "next_cursor": next_cursor}


@router.get(
    "/v1/feeds/{feed_id}/items",
    summary="A feed's items, newest first",
    description="`?limit=` (default 50, at most 200) and `?after=` (the previous page's `next_cursor`); "
    "`next_cursor` is null when the page is not full.",
    response_model=FeedItemListResponse,
    responses={404: {"model": ErrorOut, "description": "No such feed in the account"}},
)
def list_items(feed_id: str, session: SessionDep, principal: V1User, cursor: PageCursor) -> Response:
    # Rows are plain JSON already: written as they are, without a model round trip per item.
    return json_response(item_page(session, principal.account.id, feed_id, cursor))
