"""Fixtures for /api/auth, OAuth and the account pages: users with usernames and passwords, apps with
the auth settings a test needs, and signing in as a browser would (the cookie, and this service's Origin)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.identity.accounts import create_user
from app.identity.session_cookie import SESSION_COOKIE
from app.main import create_app
from app.models import User, UserSession

ORIGIN = "http://127.0.0.1:8000"  # the origin of the test settings' base URL
SAME_ORIGIN = {"Origin": ORIGIN}
PASSWORD = "correct horse battery"


@dataclass
class Person:
    user_id: int
    account_id: int
    username: str
    password: str
    email: str


@pytest.fixture
def make_person(session_factory: sessionmaker[Session]) -> Callable[..., Person]:
    """make_person(username, password=PASSWORD, is_staff=False, ...) -> Person, committed in the test's
    transaction."""
    counter = iter(range(1, 10_000))

    def make(username: str, password: str = PASSWORD, **options: Any) -> Person:
        email = options.pop("email", None) or f"{username.lower()}{next(counter)}@example.com"
        with session_factory() as session:
            user = create_user(
                session,
                email=email,
                name=options.pop("name", username),
                username=username,
                password=password,
                **options,
            )
            session.commit()
            return Person(user.id, user.account_id, username, password, email)

    return make


@pytest.fixture
def staff(make_person: Callable[..., Person]) -> Person:
    return make_person("Grace_H", is_staff=True)


@pytest.fixture
def member(make_person: Callable[..., Person]) -> Person:
    return make_person("ada.l")


@pytest.fixture
def make_client(
    settings: Settings, session_factory: sessionmaker[Session]
) -> Iterator[Callable[..., TestClient]]:
    """make_client(auth_signup_enabled=True, auth_username_change="always", ...) -> a TestClient of an app
    with those settings, over the test's transaction."""
    opened: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        app = create_app(settings=settings.model_copy(update=overrides), session_factory=session_factory)
        client = TestClient(app, raise_server_exceptions=False, follow_redirects=False)
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def auth_client(make_client: Callable[..., TestClient]) -> TestClient:
    """The default settings: sign-up closed, usernames never change."""
    return make_client()


def sign_in(client: TestClient, person: Person, **extra: Any) -> dict[str, Any]:
    response = client.post(
        "/api/auth/sign-in/username", json={"username": person.username, "password": person.password, **extra}
    )
    assert response.status_code == 200, response.text
    assert client.cookies.get(SESSION_COOKIE)
    body: dict[str, Any] = response.json()
    return body


def count_users(db: Session) -> int:
    return int(db.scalar(select(func.count()).select_from(User)) or 0)


def count_sessions(db: Session) -> int:
    return int(db.scalar(select(func.count()).select_from(UserSession)) or 0)
