"""GET /contacts has one definition (contact_listing.ContactsSql and page_reads) and two executors: the
session one (SQLite, and filtered listings) and the psycopg one on the event loop (PostgreSQL, the
unfiltered hot path). Both run here over the same committed rows and must give the same pages: every
filter, deep pages with and without remembered page starts, deleted and restored contacts.

PostgreSQL only: the psycopg executor needs PostgreSQL and rows another connection can see."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import create_db_engine, is_sqlite_url, make_async_pool, make_session_factory, transaction
from app.identity.accounts import create_user
from app.identity.principal import AccountInfo, Principal, principal_of
from app.kit.pagination import PageAnchors, PageRequest
from app.mail import contact_service
from app.mail.contact_listing import (
    CONTACTS_PER_PAGE,
    ContactsListing,
    ContactsPage,
    contacts_listing,
    read_page_in_session,
    read_page_on_pool,
)
from app.mail.contact_service import ContactWrite
from app.mail.list_service import add_list
from app.mail.specs import ContactFilter
from app.models import Account, Contact, User
from tests.scratch_database import scratch_database

CONTACTS = 330  # four pages


@dataclass
class Rows:
    url: str
    factory: sessionmaker[Session]
    user_id: int
    list_id: int

    def account(self) -> AccountInfo:
        """The account as a request sees it now (its count and version move with deletes)."""
        with self.factory() as session:
            user = session.get_one(User, self.user_id)
            return principal_of(user, session.get_one(Account, user.account_id)).account

    def principal(self, session: Session) -> Principal:
        user = session.get_one(User, self.user_id)
        return principal_of(user, session.get_one(Account, user.account_id))


def name_of(i: int) -> str:
    # Some names need escaping in JSON, some match the search below in the first or the last name.
    names = ['Zoë "Q"', "O'Brien \\ back", "tab\there", "Ann", "ANNA", "Bob"]
    return names[i % len(names)]


@pytest.fixture(scope="module")
def rows(database_url: str) -> Iterator[Rows]:
    if is_sqlite_url(database_url):
        pytest.skip("PostgreSQL only: the psycopg executor of GET /contacts runs on PostgreSQL alone")
    with scratch_database(database_url, "contacts_parity") as url:
        engine = create_db_engine(url)
        factory = make_session_factory(engine)
        with transaction(factory) as session:
            user = create_user(session, email="owner@example.com", name="Owner", contact_limit=10_000)
            other = create_user(session, email="other@example.com", name="Other", contact_limit=10_000)
            session.flush()
            list_id = add_list(session, user.account_id, user.id, "Members").id
        made = Rows(url, factory, user.id, list_id)
        with transaction(factory) as session:
            writes = [
                ContactWrite(
                    email=f"C{i:04d}@Example.com" if i % 7 else f"ann{i:04d}@example.com",
                    first_name=name_of(i),
                    last_name=name_of(i + 1) if i % 5 else None,
                    ip_address="2001:db8::1" if i % 3 == 0 else None,
                    lists=[list_id] if i % 4 == 0 else [],
                )
                for i in range(CONTACTS)
            ]
            contact_service.upsert_contacts(session, made.principal(session), writes, validation_status=422)
            # Another account's contacts, with the same addresses: never in the owner's listings.
            other_principal = principal_of(other, session.get_one(Account, other.account_id))
            theirs = [ContactWrite(email=write.email, first_name="Theirs") for write in writes[:50]]
            contact_service.upsert_contacts(session, other_principal, theirs, validation_status=422)
        with transaction(factory) as session:
            principal = made.principal(session)
            ids = list(
                session.scalars(
                    select(Contact.id).where(Contact.account_id == principal.account.id).order_by(Contact.id)
                )
            )
            for contact_id in ids[5:40:3] + ids[150:160] + ids[-3:]:
                contact_service.delete_contact(session, principal, session.get_one(Contact, contact_id))
            for contact_id in ids[0:120:6]:
                contact_service.unsubscribe_contacts(session, [contact_id], contact_service.utcnow())
        with transaction(factory) as session:
            # Restored contacts (deleted, then written again) come back where their ids are.
            restored = [
                ContactWrite(email=session.get_one(Contact, contact_id).email, first_name="Back")
                for contact_id in ids[5:40:6]
            ]
            contact_service.upsert_contacts(session, made.principal(session), restored, validation_status=422)
        try:
            yield made
        finally:
            engine.dispose()


FILTERS = [
    ContactFilter(),
    ContactFilter(query="ann"),
    ContactFilter(query="ANN"),
    ContactFilter(query="o'brien"),
    ContactFilter(query="o'brien \\"),  # a backslash is LIKE's escape: matches nothing, in both
    ContactFilter(query="nobody"),
    ContactFilter(email="c0001@example.com"),
    ContactFilter(email="C0010@EXAMPLE.COM"),
    ContactFilter(email="ann0007@example.com"),
    ContactFilter(email="absent@example.com"),
    ContactFilter(unsubscribed=True),
    ContactFilter(unsubscribed=False),
    ContactFilter(query="ann", unsubscribed=True),
    ContactFilter(query="ann", email="ann0021@example.com"),
    ContactFilter(query="ann", email="ann0014@example.com"),  # deleted
    ContactFilter(query="zo", email="c0006@example.com", unsubscribed=True),
    ContactFilter(query="zo", email="c0006@example.com", unsubscribed=False),
]


def listings(rows: Rows) -> list[ContactsListing]:
    account = rows.account()
    plain = [contacts_listing(account, filters) for filters in FILTERS]
    on_list = [
        contacts_listing(account, ContactFilter(), list_id=rows.list_id),
        contacts_listing(account, ContactFilter(query="bob"), list_id=rows.list_id),
        contacts_listing(account, ContactFilter(), list_id=rows.list_id + 1000),
    ]
    return plain + on_list


def as_json(page: ContactsPage) -> tuple[int, int, Any]:
    return page.total, page.count, orjson.loads(orjson.dumps(page.data))


async def compare(
    rows: Rows, pool: AsyncConnectionPool, listing: ContactsListing, page: PageRequest
) -> tuple[int, int, Any]:
    """Both executors, each with fresh anchors and then with the other's: the same page every time."""
    with rows.factory() as session:
        fresh_session = as_json(read_page_in_session(session, listing, page, PageAnchors()))
    fresh_pool = as_json(await read_page_on_pool(pool, listing, page, PageAnchors()))
    assert fresh_pool == fresh_session, (listing, page)
    # The page starts one executor remembered lead the other to the same page.
    anchors = PageAnchors()
    await read_page_on_pool(pool, listing, page, anchors)
    with rows.factory() as session:
        assert as_json(read_page_in_session(session, listing, page, anchors)) == fresh_session
    anchors = PageAnchors()
    with rows.factory() as session:
        read_page_in_session(session, listing, page, anchors)
    assert as_json(await read_page_on_pool(pool, listing, page, anchors)) == fresh_session
    return fresh_session


@asynccontextmanager
async def pool_of(rows: Rows) -> AsyncIterator[AsyncConnectionPool]:
    pool = make_async_pool(rows.url, max_size=2)
    await pool.open()
    try:
        yield pool
    finally:
        await pool.close()


async def all_pages_alike(rows: Rows, pool: AsyncConnectionPool, listing: ContactsListing) -> None:
    """Every page of the listing, and the one past its end, alike in both executors; together they hold
    each contact of the listing once, in id order."""
    with rows.factory() as session:
        first = read_page_in_session(session, listing, PageRequest(1, CONTACTS_PER_PAGE), PageAnchors())
    last = max(1, -(-first.total // CONTACTS_PER_PAGE))
    seen: list[int] = []
    for number in range(1, last + 2):
        _, count, data = await compare(rows, pool, listing, PageRequest(number, CONTACTS_PER_PAGE))
        assert count == len(data)
        seen += [contact["id"] for contact in data]
    assert seen == sorted(set(seen)) and len(seen) == first.total


def test_both_executors_give_the_same_pages_for_every_filter(rows: Rows) -> None:
    async def run() -> None:
        async with pool_of(rows) as pool:
            for listing in listings(rows):
                await all_pages_alike(rows, pool, listing)

    asyncio.run(run())


def test_the_unfiltered_listing_holds_the_live_contacts_restored_ones_included(rows: Rows) -> None:
    account = rows.account()
    with rows.factory() as session:
        live = list(
            session.scalars(
                select(Contact.id)
                .where(Contact.account_id == account.id, Contact.deleted_at.is_(None))
                .order_by(Contact.id)
            )
        )
    listing = contacts_listing(account, ContactFilter())
    assert listing.total == len(live) == CONTACTS - 25 + 6

    async def run() -> list[int]:
        ids: list[int] = []
        async with pool_of(rows) as pool:
            for number in range(1, 5):
                data = (await compare(rows, pool, listing, PageRequest(number, CONTACTS_PER_PAGE)))[2]
                ids += [contact["id"] for contact in data]
        return ids

    assert asyncio.run(run()) == live


def test_a_deep_page_past_a_stale_total_is_empty_in_both(rows: Rows) -> None:
    # A cached principal may carry a count a little ahead of the rows: the page is then empty, not wrong.
    account = rows.account()
    listing = contacts_listing(account, ContactFilter())
    stale = ContactsListing(listing.shape, listing.values, total=(listing.total or 0) + 150, anchor_key=None)

    async def run() -> tuple[int, int, Any]:
        async with pool_of(rows) as pool:
            return await compare(rows, pool, stale, PageRequest(5, CONTACTS_PER_PAGE))

    assert asyncio.run(run()) == ((listing.total or 0) + 150, 0, [])
