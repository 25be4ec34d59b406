"""A lost database, through a real `tidings serve` on PostgreSQL: a TCP relay in front of a scratch
database is cut (every connection closed, each new one closed on arrival). Every interface then answers
503 with Retry-After, in its own error shape, within a few seconds, and no request goes unanswered; the
log says so in a line every few seconds, never a traceback; the background jobs back off; once the relay
is restored the service answers again on its own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.db import create_db_engine, is_sqlite_url, make_write_session_factory
from app.identity.accounts import create_user
from app.identity.token_lookup import TOKEN_CACHE_SECONDS
from app.identity.tokens import create_personal_token
from tests.processes import Running, shipped_serve
from tests.scratch_database import scratch_database
from tests.shipped import wait_until
from tests.tcp_relay import TcpRelay, tcp_relay

PASSWORD = "lost-database-password-1"


@pytest.fixture
def scratch(database_url: str) -> Iterator[str]:
    if is_sqlite_url(database_url):
        pytest.skip("a database server to lose: PostgreSQL only")
    with scratch_database(database_url, "lost") as url:
        yield url


@pytest.fixture
def token(scratch: str) -> str:
    engine = create_db_engine(scratch)
    try:
        with make_write_session_factory(engine)() as session:
            user = create_user(
                session, email="lost@example.com", name="Lost", username="lost", password=PASSWORD
            )
            _, made = create_personal_token(session, user)
            session.commit()
    finally:
        engine.dispose()
    return made


@pytest.fixture
def relay(scratch: str) -> Iterator[TcpRelay]:
    url = make_url(scratch)
    with tcp_relay(url.host or "127.0.0.1", url.port or 5432) as made:
        yield made


@pytest.fixture
def server(scratch: str, relay: TcpRelay, tmp_path: Path) -> Iterator[Running]:
    relayed = make_url(scratch).set(host="127.0.0.1", port=relay.port).render_as_string(hide_password=False)
    with shipped_serve(relayed, tmp_path / "var") as served:
        yield served


def test_a_lost_database_is_503_everywhere_then_recovers(
    server: Running, relay: TcpRelay, token: str
) -> None:
    bearer = {"Authorization": f"Bearer {token}"}
    requests = [
        ("GET", "/me", bearer, None),
        ("GET", "/contacts", bearer, None),
        ("POST", "/lists", bearer, {"name": "Outage"}),
        ("GET", "/v1/feeds", bearer, None),
        (
            "POST",
            "/api/auth/sign-in/username",
            {"Origin": server.base},
            {"username": "lost", "password": PASSWORD},
        ),
        ("GET", "/healthz", {}, None),
    ]

    def send(request: tuple[str, str, dict[str, str], object]) -> tuple[httpx.Response | None, float]:
        method, path, headers, body = request
        started = time.monotonic()
        try:
            answer = httpx.request(method, server.base + path, headers=headers, json=body, timeout=30)
        except httpx.TransportError:
            return None, time.monotonic() - started
        return answer, time.monotonic() - started

    with httpx.Client(base_url=server.base, timeout=30) as http:
        assert http.get("/me", headers=bearer).status_code == 200
        assert http.get("/v1/feeds", headers=bearer).status_code == 200

    relay.cut()
    # Each process remembers a bearer token's principal for a second (CachedTokenLookup), and GET /me
    # reads nothing else: within that second it rightly answers from memory. Past it, it must say 503.
    time.sleep(TOKEN_CACHE_SECONDS + 0.2)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        for _ in range(3):
            answers = list(pool.map(send, requests * 2))
            for (method, path, _, _), (answer, took) in zip(requests * 2, answers, strict=True):
                assert answer is not None, f"{method} {path}: no answer"
                assert answer.status_code == 503, (path, answer.status_code, answer.text)
                assert took < 6, (path, took)
                if path == "/healthz":
                    continue
                assert answer.headers["Retry-After"] == "5", path
                body = answer.json()
                if path.startswith("/v1/"):
                    assert body["error"] == "database_unavailable", body
                elif path.startswith("/api/auth"):
                    assert body["code"] == "DATABASE_UNAVAILABLE", body
                else:
                    assert set(body) == {"message"}, body
    outage = time.monotonic() - started
    log = server.output()
    lines = log.count("the database is unreachable")
    # One line every five seconds at most, for the requests and the background jobs together.
    assert 1 <= lines <= outage / 5 + 2, (lines, outage)
    assert "Traceback" not in log

    relay.restore()
    back = time.monotonic()
    wait_until(
        lambda: httpx.get(f"{server.base}/me", headers=bearer, timeout=30).status_code == 200,
        "recovery",
        server,
        patience=20,
    )
    assert time.monotonic() - back < 15
    assert httpx.get(f"{server.base}/v1/feeds", headers=bearer, timeout=30).status_code == 200
