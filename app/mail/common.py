"""Pieces every email API feature uses: owned-row lookups, list id checks, paging a query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastapi import Request
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.kit.errors import NotFound, ValidationFailed
from app.kit.pagination import PageRequest, page_envelope, parse_page
from app.models import ContactList

RowT = TypeVar("RowT")


@dataclass
class Paged(Generic[RowT]):
    rows: list[RowT]
    page: PageRequest
    total: int
    path: str
    query: dict[str, str]

    def envelope(self, data: list[Any]) -> dict[str, Any]:
        return page_envelope(data, self.total, self.page, self.path, self.query)


def paginate(
    session: Session, request: Request, query: Select[RowT], per_page: int, total: int | None = None
) -> Paged[RowT]:
    """One page of `query` (`?page=N`) and its total; pass `total` when it is already known."""
    page = parse_page(request.query_params.get("page"), per_page)
    if total is None:
        total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    rows = (
        list(session.scalars(query.limit(page.per_page).offset(page.offset))) if page.offset < total else []
    )
    path = str(request.base_url).rstrip("/") + request.url.path
    return Paged(rows, page, total, path, dict(request.query_params))


def check_list_ids(
    session: Session, account_id: int, list_ids: list[int], field: str, status: int
) -> list[int]:
    """The ids, deduplicated in order, after checking each names a live list of the account."""
    unique = list(dict.fromkeys(list_ids))
    if not unique:
        return []
    found = set(
        session.scalars(
            select(ContactList.id).where(
                ContactList.account_id == account_id,
                ContactList.id.in_(unique),
                ContactList.deleted_at.is_(None),
            )
        )
    )
    errors = {
        f"{field}.{i}": [f"The selected {field}.{i} is invalid."]
        for i, list_id in enumerate(list_ids)
        if list_id not in found
    }
    if errors:
        raise ValidationFailed(errors, status=status)
    return unique


def owned(session: Session, model: type[RowT], row_id: int, account_id: int, message: str) -> RowT:
    """A live row of the account by id, or 404: another account's row is indistinguishable from none."""
    row = session.get(model, row_id)
    if row is None or getattr(row, "account_id", None) != account_id or getattr(row, "deleted_at", None):
        raise NotFound(message)
    return row
