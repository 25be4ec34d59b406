"""A feed's items, read as plain rows a page at a time, answered as wire models built without validation."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.feeds.feed_service import find_feed
from app.feeds.wire import FeedItemListResponse, FeedItemWire
from app.kit.errors import NotFound
from app.kit.ids import normalize_ulid
from app.kit.json_types import JsonObject
from app.kit.v1_input import Cursor
from app.models import FeedItem

ITEM_COLUMNS = (
    FeedItem.id,
    FeedItem.source_kind,
    FeedItem.external_id,
    FeedItem.occurred_at,
    FeedItem.source_label,
    FeedItem.data,
)


def _item_wire(row: Any) -> FeedItemWire:
    # ITEM_COLUMNS are the model's fields in its order. Built without validation: `data` is what the
    # outside feed wrote, kept and written as it is.
    return FeedItemWire.model_construct(**dict(zip(FeedItemWire.model_fields, row, strict=True)))


def item_data(item: FeedItemWire) -> JsonObject:
    """An item's `data` as it is: the models are built without validation, so it is the outside feed's
    JSON object, not one of the payload models the OpenAPI document describes."""
    return cast("JsonObject", item.data)


def read_item(session: Session, account_id: int, item_id: str) -> FeedItemWire:
    """One item by its own id, or 404 (another account's is indistinguishable from none)."""
    canonical = normalize_ulid(item_id)
    row = (
        session.execute(
            select(*ITEM_COLUMNS).where(FeedItem.id == canonical, FeedItem.account_id == account_id)
        ).first()
        if canonical is not None
        else None
    )
    if row is None:
        raise NotFound(f"No feed item {item_id}.")
    return _item_wire(row)


def item_page(session: Session, account_id: int, feed_id: str, cursor: Cursor) -> FeedItemListResponse:
    feed = find_feed(session, account_id, feed_id)
    query = select(*ITEM_COLUMNS).where(FeedItem.feed_id == feed.id)
    if cursor.after is not None:
        query = query.where(FeedItem.id < cursor.after)
    rows = session.execute(query.order_by(FeedItem.id.desc()).limit(cursor.limit)).all()
    items = [_item_wire(row) for row in rows]
    next_cursor = items[-1].id if len(items) == cursor.limit else None
    return FeedItemListResponse.model_construct(items=items, next_cursor=next_cursor)
