"""The account pages: sign in and out with the session cookie, and /account/tokens, where a signed-in
person creates personal access tokens (shown once) and revokes them (refused at once by the email API)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.identity.session_cookie import SESSION_COOKIE
from app.models import PersonalToken
from tests.authroutes.conftest import SAME_ORIGIN, Person, count_sessions, sign_in
from tests.conftest import ApiUser


def new_token_of(html: str) -> str:
    found = re.search(r'id="token-value">([^<]+)<', html)
    assert found, html
    return found.group(1)


def test_the_tokens_page_sends_strangers_to_sign_in(auth_client: TestClient) -> None:
    response = auth_client.get("/account/tokens")
    assert response.status_code == 303
    assert response.headers["location"] == "/account/sign-in?next=%2Faccount%2Ftokens"
    page = auth_client.get(response.headers["location"])
    assert page.status_code == 200
    assert '<label for="username">' in page.text and '<label for="password">' in page.text
    assert page.headers["x-frame-options"] == "DENY"


def test_signing_in_on_the_page_sets_the_cookie_and_goes_on(
    auth_client: TestClient, member: Person, db: Session
) -> None:
    response = auth_client.post(
        "/account/sign-in",
        data={"username": member.username, "password": member.password, "next": "/account/tokens"},
        headers=SAME_ORIGIN,
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/account/tokens"
    assert auth_client.cookies.get(SESSION_COOKIE)
    assert count_sessions(db) == 1


@pytest.mark.parametrize(
    "next_path", ["https://evil.example/", "//evil.example", "/\\evil.example", "javascript:x"]
)
def test_sign_in_never_redirects_off_the_service(
    auth_client: TestClient, member: Person, next_path: str
) -> None:
    response = auth_client.post(
        "/account/sign-in",
        data={"username": member.username, "password": member.password, "next": next_path},
        headers=SAME_ORIGIN,
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/account/tokens"


def test_a_wrong_password_on_the_page_is_401_with_an_alert(
    auth_client: TestClient, member: Person, db: Session
) -> None:
    response = auth_client.post(
        "/account/sign-in", data={"username": member.username, "password": "nope"}, headers=SAME_ORIGIN
    )
    assert response.status_code == 401
    assert 'role="alert"' in response.text
    assert count_sessions(db) == 0
    cross = auth_client.post(
        "/account/sign-in",
        data={"username": member.username, "password": member.password},
        headers={"Origin": "https://evil.example"},
    )
    assert cross.status_code == 403
    assert count_sessions(db) == 0


def test_create_a_token_use_it_and_revoke_it(auth_client: TestClient, member: Person, db: Session) -> None:
    sign_in(auth_client, member)
    page = auth_client.get("/account/tokens")
    assert page.status_code == 200
    assert "You have no tokens" in page.text
    created = auth_client.post("/account/tokens", data={"name": "zapier <x>"}, headers=SAME_ORIGIN)
    assert created.status_code == 201, created.text
    token = new_token_of(created.text)
    assert token.startswith("tdg_")
    assert "zapier &lt;x&gt;" in created.text
    api = TestClient(auth_client.app)
    bearer = {"Authorization": f"Bearer {token}"}
    assert api.get("/me", headers=bearer).status_code == 200  # also cached now
    # Listed afterwards by name and prefix, never in full.
    listed = auth_client.get("/account/tokens").text
    assert "zapier &lt;x&gt;" in listed and token[:12] in listed and token not in listed
    row = db.scalars(select(PersonalToken).where(PersonalToken.user_id == member.user_id)).one()
    revoked = auth_client.post(f"/account/tokens/{row.id}/revoke", headers=SAME_ORIGIN)
    assert revoked.status_code == 303
    # At once, although the email API remembered the token a moment ago.
    assert api.get("/me", headers=bearer).status_code == 401
    assert "You have no tokens" in auth_client.get("/account/tokens").text


def test_nobody_revokes_another_persons_token(
    auth_client: TestClient, member: Person, api_user: ApiUser, db: Session
) -> None:
    sign_in(auth_client, member)
    other = db.scalars(select(PersonalToken).where(PersonalToken.user_id == api_user.user_id)).one()
    response = auth_client.post(f"/account/tokens/{other.id}/revoke", headers=SAME_ORIGIN)
    assert response.status_code == 404
    assert TestClient(auth_client.app).get("/me", headers=api_user.headers).status_code == 200
    for path in ("/account/tokens/abc/revoke", "/account/tokens/99999999999999999999/revoke"):
        assert auth_client.post(path, headers=SAME_ORIGIN).status_code == 404


def test_token_writes_need_a_session_and_this_services_origin(
    auth_client: TestClient, member: Person, db: Session
) -> None:
    assert auth_client.post("/account/tokens", data={"name": "x"}).status_code == 303
    sign_in(auth_client, member)
    refused = auth_client.post(
        "/account/tokens", data={"name": "x"}, headers={"Origin": "https://evil.example"}
    )
    assert refused.status_code == 403
    too_long = auth_client.post("/account/tokens", data={"name": "n" * 192}, headers=SAME_ORIGIN)
    assert too_long.status_code == 400
    assert db.scalars(select(PersonalToken).where(PersonalToken.user_id == member.user_id)).first() is None


def test_sign_out_on_the_page(auth_client: TestClient, member: Person, db: Session) -> None:
    sign_in(auth_client, member)
    response = auth_client.post("/account/sign-out", headers=SAME_ORIGIN)
    assert response.status_code == 303
    assert count_sessions(db) == 0
    assert auth_client.get("/account/tokens").status_code == 303
