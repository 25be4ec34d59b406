"""The contact search (GET /contacts?query=, the console's search): part of the address, the first name,
the last name, or "first last", whatever the case; on PostgreSQL it reads the trigram index, not every
contact of the account."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import is_sqlite_url
from app.models import Contact
from app.models.contacts import contact_search_text
from tests.conftest import ApiUser
from tests.factories import create_contact


def found(client: TestClient, user: ApiUser, query: str) -> list[str]:
    answer = client.get("/contacts", params={"query": query}, headers=user.headers)
    assert answer.status_code == 200, answer.text
    return [contact["email"] for contact in answer.json()["data"]]


def test_a_search_finds_part_of_the_address_a_name_or_the_full_name(
    client: TestClient, api_user: ApiUser
) -> None:
    create_contact(client, api_user, "ann@example.com", first_name="Ann", last_name="Smith")
    create_contact(client, api_user, "bob@Example.org", first_name="Bob", last_name="Annett")
    create_contact(client, api_user, "cy@example.net")
    assert found(client, api_user, "EXAMPLE.ORG") == ["bob@Example.org"]
    assert found(client, api_user, "ann") == ["ann@example.com", "bob@Example.org"]
    assert found(client, api_user, "smi") == ["ann@example.com"]
    assert found(client, api_user, "Ann Smith") == ["ann@example.com"]
    assert found(client, api_user, "example") == ["ann@example.com", "bob@Example.org", "cy@example.net"]
    assert found(client, api_user, "nobody") == []


def test_on_postgresql_the_search_reads_the_trigram_index(
    api_user: ApiUser, db: Session, database_url: str
) -> None:
    if is_sqlite_url(database_url):
        return  # SQLite has no trigram index: it reads the account's contacts
    # The listing's own condition: the expression must be the index's, or PostgreSQL cannot use it.
    search = select(func.count()).select_from(Contact).where(contact_search_text().like("%last4242%"))
    statement = str(search.compile(db.get_bind(), compile_kwargs={"literal_binds": True}))
    driver = db.connection().connection.driver_connection
    # The planner would rather read a test's few rows whole: told not to, it must find the index usable.
    driver.execute("SET LOCAL enable_seqscan = off")
    plan = "\n".join(row[0] for row in driver.execute("EXPLAIN " + statement.replace("%%", "%")))
    assert "ix_contacts_search" in plan, plan
