"""Pieces every email API feature uses: owned-row lookups, list id checks, paging a query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from app.kit.errors import NotFound, ValidationFailed
from app.kit.pagination import PageRequest, Paging, page_envelope, parse_page
from app.mail.wire import Page
from app.models import ContactList

RowT = TypeVar("RowT")
ItemT = TypeVar("ItemT")

# Ids are 32-bit on PostgreSQL; a larger number names no row (and the database refuses to compare it).
MAX_ID = 2**31 - 1


def valid_id(value: int) -> bool:
    return 1 <= value <= MAX_ID


@dataclass
class Paged(Generic[RowT]):
    rows: list[RowT]
    page: PageRequest
    total: int
    path: str
    query: dict[str, str]

    def as_page(self, data: list[ItemT]) -> Page[ItemT]:
        """`data` (this page's rows as their response models) in the envelope."""
        return Page.model_construct(**page_envelope(data, self.total, self.page, self.path, self.query))


def paginate(
    session: Session, paging: Paging, query: Select[RowT], per_page: int, total: int | None = None
) -> Paged[RowT]:
    """One page of `query` (`?page=N`) and its total; pass `total` when it is already known."""
    page = parse_page(paging.page, per_page)
    rows, total = page_of(session, query, page, total)
    return Paged(rows, page, total, paging.path, paging.query)


def page_of(
    session: Session, query: Select[RowT], page: PageRequest, total: int | None = None
) -> tuple[list[RowT], int]:
    """The rows of one page of `query` and the query's total (counted unless given)."""
    if total is None:
        total = session.scalar(select(func.count()).select_from(query.order_by(None).subquery())) or 0
    return (list(session.scalars(page_query(query, page))) if page.offset < total else []), total


def page_query(query: Select[Any], page: PageRequest) -> Select[Any]:
    """`query` limited to one page. Past the first page, for a query of whole rows with an `id`, the
    OFFSET runs over the ids alone and only the page's rows are read: skipping 50,000 contacts then
    walks the (account_id, id) index without visiting the table, about 2.5x less work for PostgreSQL."""
    limited = query.limit(page.per_page).offset(page.offset)
    described = query.column_descriptions
    entity = described[0]["entity"] if len(described) == 1 else None
    id_column = getattr(entity, "id", None)
    if page.offset == 0 or entity is None or described[0]["expr"] is not entity or id_column is None:
        return limited
    ids = limited.with_only_columns(id_column).subquery()
    return select(entity).join(ids, id_column == ids.c.id).order_by(*query._order_by_clauses)


def live_list_ids_among(session: Session, account_id: int, list_ids: list[int]) -> set[int]:
    """Which of `list_ids` name live lists of the account."""
    wanted = {i for i in list_ids if valid_id(i)}
    if not wanted:
        return set()
    return set(
        session.scalars(
            select(ContactList.id).where(
                ContactList.account_id == account_id,
                ContactList.id.in_(wanted),
                ContactList.deleted_at.is_(None),
            )
        )
    )


def check_list_ids(
    session: Session, account_id: int, list_ids: list[int], field: str, status: int
) -> list[int]:
    """The ids, deduplicated in order, after checking each names a live list of the account."""
    unique = list(dict.fromkeys(list_ids))
    if not unique:
        return []
    found = live_list_ids_among(session, account_id, unique)
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
