"""Page-number pagination with the Laravel envelope the email API's clients read."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from threading import Lock
from typing import Any
from urllib.parse import urlencode

import orjson


@dataclass(frozen=True)
class PageRequest:
    page: int
    per_page: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page


@dataclass(frozen=True)
class Paging:
    """What a listing's request asks of its pages, read once by the route: the raw `?page=`, the
    listing's URL without its query (the base of the envelope's links) and the query, kept in them."""

    page: str | None
    path: str
    query: dict[str, str]


# The envelope as plain JSON values, for orjson: the contact listings (the hot path) write it without
# building a response model, their rows as dicts or as JSON text PostgreSQL built (an orjson Fragment).
PageEnvelope = dict[str, Any]

# Beyond this a page number can only ask for an empty page; capping it keeps OFFSET arithmetic sane.
MAX_PAGE = 10_000_000


def parse_page(raw: str | None, per_page: int) -> PageRequest:
    """`?page=N`, 1-based. Like Laravel, anything that is not a positive integer means page 1."""
    try:
        page = int(raw) if raw is not None else 1
    except ValueError:
        page = 1
    page = min(max(page, 1), MAX_PAGE)
    return PageRequest(page=page, per_page=per_page)


def page_envelope(
    data: list[Any] | orjson.Fragment,
    total: int,
    request: PageRequest,
    path: str,
    query: dict[str, str] | None = None,
    *,
    count: int | None = None,
) -> PageEnvelope:
    """The envelope: data, current_page, per_page, total, last_page, from, to and the page URLs.

    `data` may be JSON already serialised (an orjson Fragment); `count` then says how many rows it holds.
    """
    last_page = max(1, -(-total // request.per_page))
    rows = count if count is not None else len(data)
    first_index = request.offset + 1 if rows else None
    last_index = request.offset + rows if rows else None
    kept = {k: v for k, v in (query or {}).items() if k != "page"}

    def url(page: int) -> str:
        return f"{path}?{urlencode({**kept, 'page': page})}"

    return {
        "current_page": request.page,
        "data": data,
        "first_page_url": url(1),
        "from": first_index,
        "last_page": last_page,
        "last_page_url": url(last_page),
        "next_page_url": url(request.page + 1) if request.page < last_page else None,
        "path": path,
        "per_page": request.per_page,
        "prev_page_url": url(request.page - 1) if request.page > 1 else None,
        "to": last_index,
        "total": total,
    }


class PageAnchors:
    """Where pages start (their first id), remembered per listing version.

    A deep page by OFFSET makes the database step over every row before it; with the first id known,
    the page is an index range scan. Keys carry a version of the listing (for contacts, the account's
    contacts_version), so a change to the set of rows makes old positions unreachable instead of wrong.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self.entries: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        self.lock = Lock()

    def get(self, key: tuple[Any, ...]) -> int | None:
        with self.lock:
            first_id = self.entries.get(key)
            if first_id is not None:
                self.entries.move_to_end(key)
            return first_id

    def put(self, key: tuple[Any, ...], first_id: int) -> None:
        with self.lock:
            self.entries[key] = first_id
            self.entries.move_to_end(key)
            while len(self.entries) > self.max_entries:
                self.entries.popitem(last=False)
