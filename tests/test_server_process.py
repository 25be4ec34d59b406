"""The app as a real server process, configured as in production (on PostgreSQL: the async pool for
authentication and contact pages, autocommit reads). Concurrent writers never fail on a lock and the
account's contact counter agrees with the rows; deep contact pages stay right as contacts change."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.models import Account, Contact
from tests.processes import committed_users, served_app


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[str]:
    with served_app(database_url, tmp_path / "var") as base:
        yield base


@pytest.fixture
def committed_user(engine: Engine) -> Iterator[tuple[int, str]]:
    with committed_users(engine, "concurrent@example.com") as [user]:
        yield user


def test_concurrent_upserts_all_succeed_and_keep_the_count(
    server: str, committed_user: tuple[int, str], engine: Engine
) -> None:
    account_id, token = committed_user
    headers = {"Authorization": f"Bearer {token}"}

    def batch(worker: int) -> list[int]:
        statuses = []
        with httpx.Client(base_url=server, headers=headers, timeout=60) as http:
            for round_ in range(5):
                # Half the addresses are shared by every worker, half are the worker's own.
                contacts = [{"email": f"shared{i}@example.com"} for i in range(20)]
                contacts += [{"email": f"w{worker}r{round_}n{i}@example.com"} for i in range(20)]
                statuses.append(http.post("/contacts/batch", json={"contacts": contacts}).status_code)
                statuses.append(
                    http.post("/contacts", json={"email": f"single{worker}@example.com"}).status_code
                )
                statuses.append(http.get("/contacts").status_code)
        return statuses

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = [status for statuses in pool.map(batch, range(8)) for status in statuses]
    assert set(results) == {200}

    expected = 20 + 8 * 5 * 20 + 8
    with Session(engine) as session:
        rows = session.scalar(
            select(func.count()).where(Contact.account_id == account_id, Contact.deleted_at.is_(None))
        )
        counter = session.scalar(select(Account.contacts_count).where(Account.id == account_id))
    assert rows == expected
    assert counter == expected
    me = httpx.get(f"{server}/me", headers=headers).json()
    assert me["contacts_count"] == expected


def test_contact_pages_served_from_the_event_loop_follow_changes(
    server: str, committed_user: tuple[int, str]
) -> None:
    _, token = committed_user
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        contacts = [{"email": f"p{i:04d}@example.com"} for i in range(250)]
        assert http.post("/contacts/batch", json={"contacts": contacts}).status_code == 200
        expected = [c["email"] for c in contacts]

        def page(number: int) -> dict[str, Any]:
            response = http.get("/contacts", params={"page": number})
            assert response.status_code == 200
            assert response.headers["x-ratelimit-limit"] == "100000"
            return dict(response.json())

        first, third = page(1), page(3)
        assert [c["email"] for c in first["data"]] == expected[:100]
        assert [c["email"] for c in page(2)["data"]] == expected[100:200]
        assert [c["email"] for c in third["data"]] == expected[200:]
        assert (third["total"], third["from"], third["to"], third["next_page_url"]) == (250, 201, 250, None)
        assert first["data"][0]["created_at"].endswith("Z")
        assert page(4)["data"] == []

        # Deleting a contact shifts every later page at once (the remembered page starts are dropped).
        assert http.delete(f"/contacts/{first['data'][0]['id']}").status_code == 200
        assert [c["email"] for c in page(2)["data"]] == expected[101:201]
        assert [c["email"] for c in page(3)["data"]] == expected[201:]
        assert page(3)["total"] == 249
        # A filtered listing takes the other path and agrees.
        filtered = http.get("/contacts", params={"page": 2, "unsubscribed": "false"}).json()
        assert [c["email"] for c in filtered["data"]] == expected[101:201]
        # ...to the byte, once parsed: the same contacts in the same shape, timestamps included.
        assert filtered["data"] == page(2)["data"]
        assert (filtered["from"], filtered["to"]) == (page(2)["from"], page(2)["to"]) == (101, 200)
        one = http.get(f"/contacts/{filtered['data'][0]['id']}").json()
        assert {key: one[key] for key in filtered["data"][0]} == filtered["data"][0]
        assert list(page(2)["data"][0]) == list(filtered["data"][0])
        beyond = page(9)
        assert (beyond["data"], beyond["from"], beyond["to"]) == ([], None, None)


@pytest.mark.parametrize("path", ["/contacts", "/v1/feeds", "/api/auth/sign-in/username"])
def test_a_client_that_hangs_up_mid_body_is_no_server_error(
    server: str, committed_user: tuple[int, str], path: str
) -> None:
    """The body promises 1,000 bytes and the client leaves after 10: the server logs no traceback (the
    fixture fails the test on one) and goes on answering."""
    _, token = committed_user
    host, port = server.removeprefix("http://").split(":")
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"email": '
    ).encode()
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(request)
        time.sleep(0.3)
    time.sleep(0.3)
    assert httpx.get(f"{server}/healthz", timeout=10).status_code == 200
