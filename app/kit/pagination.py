"""Page-number pagination with the Laravel envelope the email API's clients read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode


@dataclass(frozen=True)
class PageRequest:
    page: int
    per_page: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page


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
    data: list[Any], total: int, request: PageRequest, path: str, query: dict[str, str] | None = None
) -> dict[str, Any]:
    """The envelope: data, current_page, per_page, total, last_page, from, to and the page URLs."""
    last_page = max(1, -(-total // request.per_page))
    first_index = request.offset + 1 if data else None
    last_index = request.offset + len(data) if data else None
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
