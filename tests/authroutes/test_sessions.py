"""GET /api/auth/get-session and POST /api/auth/sign-out; forged and expired cookies; the session's
extension while in use; routes of better-auth that Tidings does not serve are 404."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.identity.session_cookie import SESSION_COOKIE
from app.identity.tokens import hash_token
from app.kit.time import utcnow
from app.models import UserSession
from tests.authroutes.conftest import SAME_ORIGIN, Person, count_sessions, sign_in

GET_SESSION = "/api/auth/get-session"


def test_get_session_without_a_cookie_is_null(auth_client: TestClient) -> None:
    response = auth_client.get(GET_SESSION)
    assert response.status_code == 200
    assert response.text == "null"
    assert response.headers["cache-control"] == "no-store"


def test_get_session_answers_the_session_and_user(auth_client: TestClient, staff: Person) -> None:
    signed = sign_in(auth_client, staff)
    body = auth_client.get(GET_SESSION).json()
    assert set(body) == {"session", "user"}
    assert set(body["session"]) == {
        "id",
        "token",
        "userId",
        "expiresAt",
        "createdAt",
        "updatedAt",
        "ipAddress",
        "userAgent",
    }
    assert body["session"]["token"] == signed["token"]
    assert body["session"]["userId"] == str(staff.user_id)
    assert body["user"] == signed["user"]


@pytest.mark.parametrize("value", ["garbage", "a.b", ".", "", "x" * 5000, "tok\u00e9n.sig"])
def test_a_forged_cookie_is_null_and_cleared(auth_client: TestClient, value: str) -> None:
    cookie = f"{SESSION_COOKIE}={value}".encode()  # bytes: httpx sends non-ASCII only that way
    response = auth_client.get(GET_SESSION, headers={"Cookie": cookie})
    assert response.status_code == 200
    assert response.text == "null"


def test_an_expired_session_is_null_cleared_and_deleted(
    auth_client: TestClient, staff: Person, db: Session
) -> None:
    token = sign_in(auth_client, staff)["token"]
    db.execute(
        update(UserSession)
        .where(UserSession.token_hash == hash_token(token))
        .values(expires_at=utcnow() - timedelta(seconds=1))
    )
    db.commit()
    response = auth_client.get(GET_SESSION)
    assert response.text == "null"
    assert 'tidings.session_token=""' in response.headers["set-cookie"]
    assert count_sessions(db) == 0


def test_a_session_in_use_is_extended_once_a_day(auth_client: TestClient, staff: Person, db: Session) -> None:
    token = sign_in(auth_client, staff)["token"]
    where = UserSession.token_hash == hash_token(token)
    two_days_in = utcnow() + timedelta(days=5)
    db.execute(update(UserSession).where(where).values(expires_at=two_days_in))
    db.commit()
    response = auth_client.get(GET_SESSION)
    assert response.status_code == 200
    assert "Max-Age=604800" in response.headers["set-cookie"]
    db.expire_all()
    assert db.scalars(select(UserSession.expires_at).where(where)).one() > utcnow() + timedelta(
        days=6, hours=23
    )
    # Within the day it is not written again.
    assert "set-cookie" not in auth_client.get(GET_SESSION).headers


def test_sign_out_ends_the_session_and_clears_the_cookie(
    auth_client: TestClient, staff: Person, db: Session
) -> None:
    token = sign_in(auth_client, staff)["token"]
    response = auth_client.post("/api/auth/sign-out", headers=SAME_ORIGIN)
    assert response.status_code == 200
    assert response.json() == {"success": True}
    assert 'tidings.session_token=""' in response.headers["set-cookie"]
    assert count_sessions(db) == 0
    # The old cookie is worthless now, even replayed.
    auth_client.cookies.clear()
    replay = auth_client.get(GET_SESSION, headers={"Cookie": f"{SESSION_COOKIE}={token}"})
    assert replay.text == "null"


def test_sign_out_without_a_session_still_succeeds(auth_client: TestClient) -> None:
    response = auth_client.post("/api/auth/sign-out")
    assert response.status_code == 200
    assert response.json() == {"success": True}


def test_sign_out_with_the_cookie_from_another_site_is_refused(
    auth_client: TestClient, staff: Person, db: Session
) -> None:
    sign_in(auth_client, staff)
    response = auth_client.post("/api/auth/sign-out", headers={"Origin": "https://evil.example"})
    assert response.status_code == 403
    assert count_sessions(db) == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/auth/sign-in/email"),
        ("POST", "/api/auth/sign-in/social"),
        ("POST", "/api/auth/forget-password"),
        ("POST", "/api/auth/change-password"),
        ("GET", "/api/auth/list-sessions"),
        ("POST", "/api/auth/delete-user"),
        ("GET", "/api/auth"),
        ("GET", "/api/auth/"),
    ],
)
def test_routes_tidings_does_not_serve_are_404(auth_client: TestClient, method: str, path: str) -> None:
    response = auth_client.request(method, path, json={})
    assert response.status_code == 404, response.text
    assert response.json() == {"code": "NOT_FOUND", "message": "Not Found."}


def test_a_known_route_with_another_method_is_405(auth_client: TestClient) -> None:
    response = auth_client.get("/api/auth/sign-in/username")
    assert response.status_code == 405
    assert response.json()["code"] == "METHOD_NOT_ALLOWED"
