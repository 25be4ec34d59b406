"""The contact listings (GET /contacts, GET /contacts/unsubscribed, GET /lists/{id}/contacts and the
console's contacts): one definition of their statements, run through a session or, on PostgreSQL, as
precompiled psycopg SQL on the event loop."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import orjson
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import DateTime, Select, Text, bindparam, cast, func, literal_column, select, type_coerce
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from app.db import PsycopgStatement
from app.identity.principal import AccountInfo
from app.kit.pagination import PageAnchors, PageEnvelope, PageRequest, Paging, page_envelope, parse_page
from app.kit.time import iso_naive_utc
from app.mail.specs import ContactFilter
from app.models import Contact, ListMembership
from app.models.contacts import contact_search_text

CONTACTS_PER_PAGE = 100

# Timestamps are read as the naive UTC values stored, skipping the column type's time zone round trip.
CONTACT_COLUMNS = (
    Contact.id,
    Contact.email,
    Contact.first_name,
    Contact.last_name,
    Contact.ip_address,
    type_coerce(Contact.unsubscribed_at, DateTime()),
    type_coerce(Contact.created_at, DateTime()),
    type_coerce(Contact.updated_at, DateTime()),
)


def contact_json(row: Any) -> dict[str, Any]:
    """A row of CONTACT_COLUMNS as ContactOut writes it (listings skip building ORM objects and models)."""
    return {
        "id": row[0],
        "email": row[1],
        "first_name": row[2],
        "last_name": row[3],
        "ip_address": row[4],
        "unsubscribed_at": iso_naive_utc(row[5]),
        "created_at": iso_naive_utc(row[6]),
        "updated_at": iso_naive_utc(row[7]),
    }


def _page_as_json(page: Select[*tuple[Any, ...]]) -> Select[int, str]:
    """(row count, the rows as a JSON array in ContactOut's shape) of a page of CONTACT_COLUMNS."""
    rows = page.subquery("page")

    def stamp(column: Any) -> Any:
        return func.to_char(column, literal_column("""'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'"""))

    contact = func.json_build_object(
        literal_column("'id'"), rows.c.id,
        literal_column("'email'"), rows.c.email,
        literal_column("'first_name'"), rows.c.first_name,
        literal_column("'last_name'"), rows.c.last_name,
        literal_column("'ip_address'"), rows.c.ip_address,
        literal_column("'unsubscribed_at'"), stamp(rows.c.unsubscribed_at),
        literal_column("'created_at'"), stamp(rows.c.created_at),
        literal_column("'updated_at'"), stamp(rows.c.updated_at),
    )  # fmt: skip
    array = func.json_agg(aggregate_order_by(contact, rows.c.id))
    json_text = cast(func.coalesce(array, literal_column("'[]'::json")), Text)
    return select(func.count(), json_text).select_from(rows)


# ------------------------------------------------------------------------------ contact listings
#
# GET /contacts, GET /contacts/unsubscribed and GET /lists/{id}/contacts are one listing: its filters,
# order and paging are defined once below, as SQLAlchemy statements with named parameters, and two
# executors run those same statements: through a session (any database, in a worker thread), and,
# compiled once to psycopg SQL that makes PostgreSQL build each page's JSON itself, on the event loop
# with the async pool. tests/mail/test_hot_read_parity.py runs both over the same rows.


@dataclass(frozen=True)
class ContactsShape:
    """Which filters a listing has, not their values: the statements depend on this alone, so each shape
    is built (and compiled for psycopg) once."""

    query: bool = False
    email: bool = False
    unsubscribed: bool | None = None
    on_list: bool = False
    # The console's "bounced" filter (the email API has no such parameter).
    bounced: bool = False


UNFILTERED = ContactsShape()


@dataclass(frozen=True)
class ContactsListing:
    """One listing to page through: its shape, the values of its parameters, its total when known
    (the account's count, for the unfiltered listing) and the key its page starts are remembered under."""

    shape: ContactsShape
    values: dict[str, Any]
    total: int | None = None
    anchor_key: tuple[Any, ...] | None = None


def contacts_listing(
    account: AccountInfo, filters: ContactFilter, list_id: int | None = None, *, bounced: bool = False
) -> ContactsListing:
    """The live contacts of the account matching `filters` (and on the list, given one; bounced ones
    only, when asked), by id."""
    shape = ContactsShape(
        query=bool(filters.query),
        email=bool(filters.email),
        unsubscribed=filters.unsubscribed,
        on_list=list_id is not None,
        bounced=bounced,
    )
    values: dict[str, Any] = {"account_id": account.id}
    if filters.query:
        values["pattern"] = f"%{filters.query.lower()}%"
    if filters.email:
        values["email_key"] = filters.email.lower()
    if list_id is not None:
        values["list_id"] = list_id
    if shape != UNFILTERED:
        return ContactsListing(shape, values)
    # Unfiltered: the account keeps the count, and its version keys the remembered page starts.
    anchor_key = ("contacts", account.id, account.contacts_version)
    return ContactsListing(shape, values, total=account.contacts_count, anchor_key=anchor_key)


def unsubscribed_listing(account: AccountInfo, filters: ContactFilter) -> ContactsListing:
    """GET /contacts/unsubscribed: the unsubscribed live contacts, searched by `query` alone."""
    return contacts_listing(account, ContactFilter(query=filters.query, unsubscribed=True))


class ContactsSql:
    """The statements of one listing shape: its count, its first page, the id at an offset and the
    page from a first id (ordered by id), and the same as psycopg SQL with each page as JSON text."""

    def __init__(self, shape: ContactsShape) -> None:
        rows = select(*CONTACT_COLUMNS).where(
            Contact.account_id == bindparam("account_id"), Contact.deleted_at.is_(None)
        )
        if shape.query:
            # One expression, that PostgreSQL's trigram index covers (models/contacts.py).
            rows = rows.where(contact_search_text().like(bindparam("pattern")))
        if shape.email:
            rows = rows.where(Contact.email_key == bindparam("email_key"))
        if shape.unsubscribed is not None:
            subscribed = Contact.unsubscribed_at.is_(None)
            rows = rows.where(~subscribed if shape.unsubscribed else subscribed)
        if shape.on_list:
            members = select(ListMembership.contact_id).where(ListMembership.list_id == bindparam("list_id"))
            rows = rows.where(Contact.id.in_(members))
        if shape.bounced:
            rows = rows.where(Contact.bounced_at.is_not(None))
        rows = rows.order_by(Contact.id)
        # Every row of the listing, unpaged (the console's CSV export of a filtered set).
        self.all_rows = rows
        self.count = select(func.count()).select_from(rows.order_by(None).subquery())
        self.first_page = rows.limit(CONTACTS_PER_PAGE)
        self.id_at_offset = rows.with_only_columns(Contact.id).offset(bindparam("offset")).limit(1)
        self.page_from = rows.where(Contact.id >= bindparam("first_id")).limit(CONTACTS_PER_PAGE)

    @cached_property
    def psycopg(self) -> dict[str, PsycopgStatement]:
        # Each page is built as JSON text by PostgreSQL itself (with its row count): the event loop then
        # only splices it into the envelope, instead of turning 100 rows into dicts and serialising them.
        return {
            "count": PsycopgStatement.of(self.count),
            "first_page": PsycopgStatement.of(_page_as_json(self.first_page)),
            "id_at_offset": PsycopgStatement.of(self.id_at_offset),
            "page_from": PsycopgStatement.of(_page_as_json(self.page_from)),
        }


@cache
def contacts_sql(shape: ContactsShape) -> ContactsSql:
    return ContactsSql(shape)


@dataclass(frozen=True)
class ContactsPage:
    """A page of a listing: the listing's total, the page's row count and its contacts (as dicts, or as
    JSON text already serialised)."""

    total: int
    count: int
    data: list[dict[str, Any]] | orjson.Fragment


@dataclass(frozen=True)
class Read:
    """One statement a page needs (a name of ContactsSql's) and its parameters' values."""

    statement: str
    values: dict[str, Any]


PageReads = Generator[Read, Any, int]


def page_reads(listing: ContactsListing, page: PageRequest, anchors: PageAnchors) -> PageReads:
    """How a page is read, whatever runs the statements: yields each statement to run and is sent its
    result (a number for `count` and `id_at_offset`, nothing for the page itself); returns the total.

    Past page 1 the page is read as `id >= first id of the page`: the first id comes from `anchors` when
    the listing (its `anchor_key`, which carries its version) was paged before, else from one index-only
    OFFSET query, and is remembered for next time.
    """
    total = listing.total
    if total is None:
        total = (yield Read("count", listing.values)) or 0
    if page.offset >= total:
        return total
    if page.offset == 0:
        yield Read("first_page", listing.values)
        return total
    key = (*listing.anchor_key, page.page) if listing.anchor_key is not None else None
    first_id = anchors.get(key) if key is not None else None
    if first_id is None:
        first_id = yield Read("id_at_offset", {**listing.values, "offset": page.offset})
        if first_id is not None and key is not None:
            anchors.put(key, first_id)
    if first_id is not None:
        yield Read("page_from", {**listing.values, "first_id": first_id})
    return total


def read_page_in_session(
    session: Session, listing: ContactsListing, page: PageRequest, anchors: PageAnchors
) -> ContactsPage:
    """The session executor: the statements through SQLAlchemy, the rows turned into dicts here."""
    sql = contacts_sql(listing.shape)
    # Core execution on the session's connection: the rows need none of the ORM's machinery.
    connection = session.connection()
    reads = page_reads(listing, page, anchors)
    data: list[dict[str, Any]] = []
    result: Any = None
    try:
        while True:
            read = reads.send(result)
            statement = getattr(sql, read.statement)
            if read.statement in ("count", "id_at_offset"):
                result = connection.scalar(statement, read.values)
            else:
                data = [contact_json(row) for row in connection.execute(statement, read.values)]
                result = None
    except StopIteration as done:
        return ContactsPage(total=done.value, count=len(data), data=data)


async def read_page_on_pool(
    pool: AsyncConnectionPool, listing: ContactsListing, page: PageRequest, anchors: PageAnchors
) -> ContactsPage:
    """The psycopg executor (PostgreSQL, on the event loop): the same statements compiled once, each
    page as JSON text built by PostgreSQL."""
    sql = contacts_sql(listing.shape).psycopg
    reads = page_reads(listing, page, anchors)
    count, data = 0, "[]"
    result: Any = None
    try:
        read = reads.send(None)
        async with pool.connection() as conn:
            while True:
                statement = sql[read.statement]
                row = await (await conn.execute(statement.sql, statement.params(**read.values))).fetchone()
                if read.statement in ("count", "id_at_offset"):
                    result = row[0] if row is not None else None
                else:
                    count, data = (row[0], row[1]) if row is not None else (0, "[]")
                    result = None
                read = reads.send(result)
    except StopIteration as done:
        return ContactsPage(total=done.value, count=count, data=orjson.Fragment(data))


def contacts_envelope(paging: Paging, page: PageRequest, contacts: ContactsPage) -> PageEnvelope:
    """A page of contacts in the envelope."""
    return page_envelope(contacts.data, contacts.total, page, paging.path, paging.query, count=contacts.count)


def contacts_page(
    session: Session, paging: Paging, listing: ContactsListing, anchors: PageAnchors
) -> PageEnvelope:
    """A page (`?page=N`) of the listing in its envelope, read through the session."""
    page = parse_page(paging.page, CONTACTS_PER_PAGE)
    return contacts_envelope(paging, page, read_page_in_session(session, listing, page, anchors))


async def contacts_page_on_pool(
    pool: AsyncConnectionPool, paging: Paging, listing: ContactsListing, anchors: PageAnchors
) -> PageEnvelope:
    """A page (`?page=N`) of the listing in its envelope, read with the async pool on the event loop
    (PostgreSQL)."""
    page = parse_page(paging.page, CONTACTS_PER_PAGE)
    return contacts_envelope(paging, page, await read_page_on_pool(pool, listing, page, anchors))


def listing_rows(session: Session, listing: ContactsListing) -> list[dict[str, Any]]:
    """Every contact of the listing, unpaged, as ContactOut writes them (the console's CSV export)."""
    rows = session.connection().execute(contacts_sql(listing.shape).all_rows, listing.values)
    return [contact_json(row) for row in rows]
