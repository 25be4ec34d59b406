"""The app as a real server process, configured as in production (on PostgreSQL: the async pool for
authentication and contact pages, autocommit reads). Concurrent writers never fail on a lock and the
account's contact counter agrees with the rows; deep contact pages stay right as contacts change."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from app.identity.accounts import create_user
from app.identity.tokens import create_personal_token
from app.models import Account, Contact


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_VAR_DIR": str(tmp_path / "var"),
        "TIDINGS_SECRET_KEY": "concurrency-test-secret-key-long-enough",
        "TIDINGS_MAIL_RATE_LIMIT": "100000/minute",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "app.main:create_app",
            "--factory",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                pytest.fail("the server did not start")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
        assert b"Traceback" not in stderr, stderr.decode()[-3000:]


@pytest.fixture
def committed_user(engine: Engine) -> Iterator[tuple[int, str]]:
    """A user whose rows are really committed (the server is another process), removed afterwards."""
    with Session(engine) as session:
        user = create_user(session, email="concurrent@example.com", name="C", contact_limit=100_000)
        _, token = create_personal_token(session, user)
        account_id = user.account_id
        session.commit()
    yield account_id, token
    with Session(engine) as session:
        session.execute(delete(Account).where(Account.id == account_id))
        session.commit()


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
