"""POST /api/auth/sign-up/email: 400 EMAIL_PASSWORD_SIGN_UP_DISABLED while sign-up is closed (the
default), whatever is sent, creating nothing; when open, better-auth's checks and `{token, user}`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.passwords import verify_password
from app.identity.session_cookie import SESSION_COOKIE
from app.models import Account, User
from tests.authroutes.conftest import ORIGIN, Person, count_sessions, count_users

URL = "/api/auth/sign-up/email"
GOOD = {
    "email": "New.Person@Example.com",
    "password": "long enough pw",
    "name": "New Person",
    "username": "New_P",
}
DISABLED = {
    "code": "EMAIL_PASSWORD_SIGN_UP_DISABLED",
    "message": "Email and password sign up is not enabled (TIDINGS_AUTH_SIGNUP_ENABLED=true opens it)",
}


@pytest.mark.parametrize(
    "body",
    [
        GOOD,
        {**GOOD, "username": "Grace_H"},
        {},
        {"email": "not an email"},
        [1, 2],
        "text",
    ],
)
def test_closed_sign_up_is_400_and_creates_nothing(
    auth_client: TestClient, staff: Person, db: Session, body: Any
) -> None:
    users = count_users(db)
    response = auth_client.post(URL, json=body)
    assert response.status_code == 400, response.text
    assert response.json() == DISABLED
    assert SESSION_COOKIE not in response.cookies
    assert count_users(db) == users
    assert count_sessions(db) == 0


def test_closed_sign_up_ignores_bodies_that_are_not_json(auth_client: TestClient) -> None:
    for content, content_type in ((b"{not json", "application/json"), (b"x=1", "text/plain"), (b"", "")):
        response = auth_client.post(URL, content=content, headers={"content-type": content_type})
        assert response.status_code == 400
        assert response.json() == DISABLED


@pytest.fixture
def open_client(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(auth_signup_enabled=True)


def test_open_sign_up_creates_the_user_and_signs_them_in(open_client: TestClient, db: Session) -> None:
    response = open_client.post(URL, json=GOOD)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"token", "user"}
    assert body["user"]["email"] == "New.Person@example.com"
    assert body["user"]["username"] == "new_p"
    assert body["user"]["displayUsername"] == "New_P"
    assert body["user"]["emailVerified"] is False
    assert body["user"]["image"] is None
    user = db.scalars(select(User).where(User.email_key == "new.person@example.com")).one()
    assert body["user"]["id"] == str(user.id)
    assert user.password_hash is not None and user.password_hash.startswith("$argon2id$")
    assert verify_password("long enough pw", user.password_hash)
    # Self-service accounts start on the free plan.
    assert db.get_one(Account, user.account_id).plan == "free"
    assert open_client.cookies.get(SESSION_COOKIE)
    session = open_client.get("/api/auth/get-session").json()
    assert session["session"]["token"] == body["token"]
    assert session["user"]["id"] == str(user.id)


@pytest.mark.parametrize("path", [URL, "/v1/auth/signup"])
def test_the_operator_chooses_the_plan_sign_up_gives(
    make_client: Callable[..., TestClient], db: Session, path: str
) -> None:
    # TIDINGS_SIGNUP_PLAN=empire: a server whose people may all use the email API from their first call.
    client = make_client(auth_signup_enabled=True, signup_plan="empire")
    response = client.post(path, json=GOOD)
    assert response.status_code in (200, 201), response.text
    user = db.scalars(select(User).where(User.email_key == "new.person@example.com")).one()
    assert db.get_one(Account, user.account_id).plan == "empire"


def test_open_sign_up_takes_a_form_body_and_a_display_username(open_client: TestClient) -> None:
    form = {"email": "f@example.com", "password": "long enough pw", "name": "F", "displayUsername": "Eff.One"}
    response = open_client.post(URL, data=form)
    assert response.status_code == 200, response.text
    assert response.json()["user"]["username"] == "eff.one"


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        ({"username": "grace_h"}, 400, "USERNAME_IS_ALREADY_TAKEN"),
        ({"username": "no"}, 400, "USERNAME_TOO_SHORT"),
        ({"username": "bad name"}, 400, "INVALID_USERNAME"),
        ({"email": "not-an-email"}, 400, "INVALID_EMAIL"),
        ({"password": "short"}, 400, "PASSWORD_TOO_SHORT"),
        ({"password": "p" * 129}, 400, "PASSWORD_TOO_LONG"),
        ({"email": "GRACE@example.com"}, 422, "USER_ALREADY_EXISTS_USE_ANOTHER_EMAIL"),
        ({"name": 5}, 400, "VALIDATION_ERROR"),
        ({"name": ""}, 400, "VALIDATION_ERROR"),
        ({"password": None}, 400, "VALIDATION_ERROR"),
        ({"name": "x" * 10_000}, 400, "VALIDATION_ERROR"),
        ({"name": "nul\x00"}, 400, "VALIDATION_ERROR"),
    ],
)
def test_open_sign_up_refuses_what_better_auth_refuses(
    open_client: TestClient,
    make_person: Callable[..., Person],
    db: Session,
    change: dict[str, Any],
    status: int,
    code: str,
) -> None:
    make_person("Grace_H", email="grace@example.com")
    users = count_users(db)
    response = open_client.post(URL, json={**GOOD, **change})
    assert response.status_code == status, response.text
    assert response.json()["code"] == code
    assert count_users(db) == users
    assert count_sessions(db) == 0


def test_open_sign_up_from_another_site_is_refused(open_client: TestClient, db: Session) -> None:
    users = count_users(db)
    response = open_client.post(URL, json=GOOD, headers={"Origin": "https://evil.example"})
    assert response.status_code == 403
    assert response.json()["code"] == "INVALID_ORIGIN"
    response = open_client.post(
        URL, json=GOOD, headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
    )
    assert response.status_code == 403
    assert response.json()["code"] == "CROSS_SITE_NAVIGATION_LOGIN_BLOCKED"
    assert count_users(db) == users
    response = open_client.post(URL, json=GOOD, headers={"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"})
    assert response.status_code == 200, response.text
