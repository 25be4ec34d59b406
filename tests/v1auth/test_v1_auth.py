"""/v1/auth: signup, login, logout, me, tokens; /v1 routes with the session cookie."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.identity.session_cookie import SESSION_COOKIE
from app.kit.time import utcnow
from app.models import PersonalToken, User, UserSession
from tests.authroutes.conftest import ORIGIN, PASSWORD, SAME_ORIGIN, Person


def login(client: TestClient, person: Person) -> dict[str, Any]:
    response = client.post("/v1/auth/login", json={"email": person.email, "password": person.password})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_login_by_email_sets_the_cookie_and_answers_the_auth_user(
    auth_client: TestClient, member: Person
) -> None:
    body = login(auth_client, member)
    assert set(body) == {"user"}
    assert body["user"]["id"] == str(member.user_id)
    assert body["user"]["email"] == member.email
    assert body["user"]["account_id"] == str(member.account_id)
    assert body["user"]["created_at"]
    assert auth_client.cookies.get(SESSION_COOKIE)


def test_login_by_username(auth_client: TestClient, member: Person) -> None:
    response = auth_client.post("/v1/auth/login", json={"username": member.username, "password": PASSWORD})
    assert response.status_code == 200
    assert response.json()["user"]["id"] == str(member.user_id)


def test_wrong_password_is_401_invalid_credentials(auth_client: TestClient, member: Person) -> None:
    response = auth_client.post("/v1/auth/login", json={"email": member.email, "password": "nope nope"})
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_credentials"
    assert set(response.json()) == {"error", "detail"}
    unknown = auth_client.post("/v1/auth/login", json={"email": "who@example.com", "password": "x"})
    assert unknown.status_code == 401


def test_login_is_throttled(auth_client: TestClient, member: Person) -> None:
    for _ in range(10):
        auth_client.post("/v1/auth/login", json={"email": member.email, "password": "wrong"})
    response = auth_client.post("/v1/auth/login", json={"email": member.email, "password": PASSWORD})
    assert response.status_code == 429
    assert response.json()["error"] == "rate_limited"
    assert response.headers["Retry-After"]


def test_me_with_the_cookie_and_with_a_bearer_token(auth_client: TestClient, member: Person) -> None:
    assert auth_client.get("/v1/auth/me").status_code == 401
    assert auth_client.get("/v1/auth/me").json()["error"] == "not_authenticated"
    login(auth_client, member)
    me = auth_client.get("/v1/auth/me")
    assert me.status_code == 200
    assert me.json()["id"] == str(member.user_id)
    made = auth_client.post("/v1/auth/tokens", json={"name": "ci"}, headers=SAME_ORIGIN)
    assert made.status_code == 201
    token = made.json()["token"]
    auth_client.cookies.clear()
    by_bearer = auth_client.get("/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert by_bearer.status_code == 200
    assert by_bearer.json()["email"] == member.email


def test_feed_routes_accept_the_cookie(auth_client: TestClient, member: Person) -> None:
    assert auth_client.get("/v1/feeds").status_code == 401
    login(auth_client, member)
    assert auth_client.get("/v1/feeds").status_code == 200
    created = auth_client.post(
        "/v1/feeds", json={"name": "by cookie", "kind": "curated", "sources": []}, headers=SAME_ORIGIN
    )
    assert created.status_code in (200, 201), created.text


def test_a_session_used_on_v1_is_extended_once_a_day(
    auth_client: TestClient, member: Person, db: Session
) -> None:
    login(auth_client, member)
    five_days_left = utcnow() + timedelta(days=5)
    db.execute(update(UserSession).values(expires_at=five_days_left))
    db.commit()
    response = auth_client.get("/v1/feeds")
    assert response.status_code == 200
    assert "Max-Age=604800" in response.headers["set-cookie"]
    db.expire_all()
    assert db.scalars(select(UserSession.expires_at)).one() > utcnow() + timedelta(days=6, hours=23)
    # Within the day it is not written again.
    assert "set-cookie" not in auth_client.get("/v1/feeds").headers


def test_cookie_writes_need_this_services_origin(auth_client: TestClient, member: Person) -> None:
    login(auth_client, member)
    response = auth_client.post(
        "/v1/feeds", json={"name": "x", "kind": "curated"}, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403
    assert auth_client.post("/v1/auth/tokens", json={}).status_code == 403  # no Origin at all


def test_a_forged_cookie_is_not_a_credential(auth_client: TestClient) -> None:
    auth_client.cookies.set(SESSION_COOKIE, "forged.value")
    assert auth_client.get("/v1/auth/me").status_code == 401
    assert auth_client.get("/v1/feeds").status_code == 401


def test_logout_ends_the_session(auth_client: TestClient, member: Person) -> None:
    login(auth_client, member)
    cookie = auth_client.cookies.get(SESSION_COOKIE)
    response = auth_client.post("/v1/auth/logout", headers=SAME_ORIGIN)
    assert response.status_code == 200
    assert response.json() == {"detail": "logged out"}
    assert (
        'tidings.session_token=""' in response.headers["set-cookie"]
        or "Max-Age=0" in response.headers["set-cookie"]
    )
    auth_client.cookies.set(SESSION_COOKIE, cookie or "")
    assert auth_client.get("/v1/auth/me").status_code == 401
    auth_client.cookies.clear()
    assert auth_client.post("/v1/auth/logout").status_code == 401


def test_signup_is_closed_by_default(auth_client: TestClient, db: Session) -> None:
    response = auth_client.post(
        "/v1/auth/signup", json={"email": "new@example.com", "password": "long enough pw"}
    )
    assert response.status_code == 403
    assert response.json()["error"] == "signup_disabled"
    assert "TIDINGS_AUTH_SIGNUP_ENABLED=true" in response.json()["detail"]
    assert db.scalar(select(User).where(User.email == "new@example.com")) is None


def test_signup_when_open(make_client: Callable[..., TestClient], db: Session) -> None:
    client = make_client(auth_signup_enabled=True)
    response = client.post("/v1/auth/signup", json={"email": "New@Example.com", "password": "long enough pw"})
    assert response.status_code == 201, response.text
    user = response.json()["user"]
    assert user["account_id"]
    assert client.cookies.get(SESSION_COOKIE)
    assert client.get("/v1/auth/me").json()["id"] == user["id"]
    client.cookies.clear()
    again = client.post("/v1/auth/signup", json={"email": "new@example.com", "password": "long enough pw"})
    assert again.status_code == 409
    assert again.json()["error"] == "email_taken"
    short = client.post("/v1/auth/signup", json={"email": "b@example.com", "password": "short"})
    assert short.status_code == 400
    assert short.json()["error"] == "validation_error"
    assert "password" in short.json()["detail"]
    bad_email = client.post("/v1/auth/signup", json={"email": "not an email", "password": "long enough pw"})
    assert bad_email.status_code == 400
    assert "email" in bad_email.json()["detail"]


def test_tokens_list_create_revoke(auth_client: TestClient, member: Person, db: Session) -> None:
    login(auth_client, member)
    made = auth_client.post("/v1/auth/tokens", json={"name": "laptop"}, headers=SAME_ORIGIN)
    assert made.status_code == 201
    body = made.json()
    assert body["token"].startswith("tdg_")
    assert body["name"] == "laptop"
    listed = auth_client.get("/v1/auth/tokens").json()["items"]
    assert [item["id"] for item in listed] == [body["id"]]
    assert "token" not in listed[0]
    bearer = {"Authorization": f"Bearer {body['token']}"}
    assert auth_client.get("/v1/feeds", headers=bearer).status_code == 200
    gone = auth_client.delete(f"/v1/auth/tokens/{body['id']}", headers=SAME_ORIGIN)
    assert gone.status_code == 204
    auth_client.cookies.clear()
    assert auth_client.get("/v1/feeds", headers=bearer).status_code == 401
    login(auth_client, member)
    assert auth_client.get("/v1/auth/tokens").json()["items"] == []
    again = auth_client.delete(f"/v1/auth/tokens/{body['id']}", headers=SAME_ORIGIN)
    assert again.status_code == 404
    assert again.json()["error"] == "not_found"
    assert auth_client.delete("/v1/auth/tokens/abc", headers=SAME_ORIGIN).status_code == 404
    row = db.scalar(select(PersonalToken).where(PersonalToken.id == body["id"]))
    assert row is not None and row.revoked_at is not None


def test_someone_elses_token_cannot_be_revoked(
    auth_client: TestClient, member: Person, make_person: Callable[..., Person]
) -> None:
    other = make_person("other_one")
    login(auth_client, other)
    theirs = auth_client.post("/v1/auth/tokens", json={}, headers=SAME_ORIGIN).json()
    auth_client.cookies.clear()
    login(auth_client, member)
    assert auth_client.delete(f"/v1/auth/tokens/{theirs['id']}", headers=SAME_ORIGIN).status_code == 404


GARBAGE: list[Any] = [None, "", "[]", "null", "42", '"text"', "{", '{"email": 5, "password": []}', "\x00"]


@pytest.mark.parametrize("path", ["/v1/auth/login", "/v1/auth/signup", "/v1/auth/device-sessions/token"])
@pytest.mark.parametrize("raw", GARBAGE)
def test_garbage_bodies_are_400(make_client: Callable[..., TestClient], path: str, raw: Any) -> None:
    client = make_client(auth_signup_enabled=True)
    content = raw.encode() if isinstance(raw, str) else b""
    response = client.post(path, content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "validation_error"


def test_garbage_to_authenticated_writes(auth_client: TestClient, member: Person) -> None:
    login(auth_client, member)
    for raw in ("[]", "{", '{"name": 5}', '{"name": "a\\u0000b"}'):
        response = auth_client.post(
            "/v1/auth/tokens", content=raw, headers={**SAME_ORIGIN, "Content-Type": "application/json"}
        )
        assert response.status_code == 400, (raw, response.text)
    response = auth_client.post(
        "/v1/auth/device-sessions/ABCD-EFGH/complete",
        content="{",
        headers={**SAME_ORIGIN, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    nul = auth_client.post(
        "/v1/auth/login", json={"email": "a\x00b@example.com", "password": "x"}, headers={"Origin": ORIGIN}
    )
    assert nul.status_code in (400, 401)


def test_auth_user_ids_are_strings_everywhere(make_client: Callable[..., TestClient], member: Person) -> None:
    """openmagpie's schema: "Ids are strings" (AuthUser's id and account_id as much as FeedWire's user_id)."""
    client = make_client(auth_signup_enabled=True)
    signed_up = client.post(
        "/v1/auth/signup", json={"email": "new@example.com", "password": PASSWORD}, headers={"Origin": ORIGIN}
    )
    assert signed_up.status_code == 201, signed_up.text
    answers = [signed_up.json()["user"], client.get("/v1/auth/me").json()]
    client.cookies.clear()
    answers.append(login(client, member)["user"])
    started = client.post("/v1/auth/device-sessions", headers=SAME_ORIGIN).json()
    done = client.post(f"/v1/auth/device-sessions/{started['user_code']}/complete", headers=SAME_ORIGIN)
    assert done.status_code == 200
    client.cookies.clear()
    polled = client.post("/v1/auth/device-sessions/token", json={"device_code": started["device_code"]})
    answers.append(polled.json()["user"])
    for user in answers:
        assert set(user) == {"id", "email", "account_id", "created_at"}
        assert isinstance(user["id"], str) and user["id"].isdigit()
        assert isinstance(user["account_id"], str) and user["account_id"].isdigit()
    assert answers[2]["id"] == answers[3]["id"] == str(member.user_id)
