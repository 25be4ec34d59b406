"""POST /api/auth/update-user: a session is required (401); username changes follow
TIDINGS_AUTH_USERNAME_CHANGE (`never` by default, `non_staff`, `always`); taken names, e-mail changes and
malformed input are refused with better-auth's codes; success is `{"status": true}`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.models import User
from tests.authroutes.conftest import SAME_ORIGIN, Person, sign_in

URL = "/api/auth/update-user"
IMMUTABLE = {"code": "USERNAME_IS_IMMUTABLE", "message": "Username cannot be updated"}
TAKEN = {"code": "USERNAME_IS_ALREADY_TAKEN", "message": "Username is already taken. Please try another."}


def user_row(db: Session, person: Person) -> User:
    db.expire_all()
    return db.get_one(User, person.user_id)


def test_without_a_session_it_is_401(auth_client: TestClient, db: Session, staff: Person) -> None:
    for body in ({"username": "new_name"}, {"name": "X"}, {}, None):
        response = auth_client.post(URL, json=body)
        assert response.status_code == 401, response.text
        assert response.json() == {"code": "UNAUTHORIZED", "message": "Unauthorized"}
    assert user_row(db, staff).username == "grace_h"


def test_a_forged_or_foreign_cookie_is_401(auth_client: TestClient, staff: Person) -> None:
    token = sign_in(auth_client, staff)["token"]
    for value in (f"{token}.forged-signature", token, "garbage", f"{token}x.{'A' * 43}"):
        auth_client.cookies.clear()
        auth_client.cookies.set("tidings.session_token", value)
        response = auth_client.post(URL, json={"name": "X"}, headers=SAME_ORIGIN)
        assert response.status_code == 401, value


def test_staff_cannot_change_their_username_by_default(
    auth_client: TestClient, db: Session, staff: Person
) -> None:
    sign_in(auth_client, staff)
    response = auth_client.post(URL, json={"username": "grace_new"}, headers=SAME_ORIGIN)
    assert response.status_code == 400, response.text
    assert response.json() == IMMUTABLE
    assert user_row(db, staff).username == "grace_h"


def test_the_same_username_in_another_case_is_not_a_change(
    auth_client: TestClient, db: Session, staff: Person
) -> None:
    sign_in(auth_client, staff)
    response = auth_client.post(URL, json={"username": "GRACE_H"}, headers=SAME_ORIGIN)
    assert response.status_code == 200, response.text
    assert response.json() == {"status": True}
    row = user_row(db, staff)
    assert (row.username, row.display_username) == ("grace_h", "GRACE_H")


@pytest.mark.parametrize(
    ("policy", "staff_may", "member_may"),
    [("never", False, False), ("non_staff", False, True), ("always", True, True)],
)
def test_the_username_change_policy(
    make_client: Callable[..., TestClient],
    db: Session,
    staff: Person,
    member: Person,
    policy: str,
    staff_may: bool,
    member_may: bool,
) -> None:
    for person, may in ((staff, staff_may), (member, member_may)):
        client = make_client(auth_username_change=policy)
        sign_in(client, person)
        wanted = f"{person.username.replace('.', '_')}_2"
        response = client.post(URL, json={"username": wanted}, headers=SAME_ORIGIN)
        if may:
            assert response.status_code == 200, response.text
            assert response.json() == {"status": True}
            assert user_row(db, person).username == wanted.lower()
            assert user_row(db, person).display_username == wanted
            # The new name signs in; the old one no longer does.
            fresh = make_client()
            ok = fresh.post(
                "/api/auth/sign-in/username", json={"username": wanted, "password": person.password}
            )
            assert ok.status_code == 200
        else:
            assert response.status_code == 400, response.text
            assert response.json() == IMMUTABLE
            assert user_row(db, person).username == person.username.lower()


def test_a_taken_username_is_refused(
    make_client: Callable[..., TestClient], db: Session, staff: Person, member: Person
) -> None:
    client = make_client(auth_username_change="always")
    sign_in(client, member)
    response = client.post(URL, json={"username": "GRACE_h"}, headers=SAME_ORIGIN)
    assert response.status_code == 400
    assert response.json() == TAKEN
    assert user_row(db, member).username == "ada.l"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"username": "ab"}, "USERNAME_TOO_SHORT"),
        ({"username": "a" * 10_000}, "USERNAME_TOO_LONG"),
        ({"username": "ádá"}, "INVALID_USERNAME"),
        ({"username": "x'); DROP TABLE users; --"}, "INVALID_USERNAME"),
        ({"email": "other@example.com"}, "EMAIL_CAN_NOT_BE_UPDATED"),
        ({"emailVerified": True}, "NO_FIELDS_TO_UPDATE"),
        ({}, "NO_FIELDS_TO_UPDATE"),
        ({"username": 42}, "VALIDATION_ERROR"),
        ({"username": None}, "VALIDATION_ERROR"),
        ({"name": ""}, "VALIDATION_ERROR"),
        ({"name": ["a"]}, "VALIDATION_ERROR"),
        ({"image": 1}, "VALIDATION_ERROR"),
        ({"name": "a\x00b"}, "VALIDATION_ERROR"),
        ([{"name": "x"}], "VALIDATION_ERROR"),
    ],
)
def test_bad_changes_are_400_and_change_nothing(
    make_client: Callable[..., TestClient], db: Session, member: Person, body: Any, code: str
) -> None:
    client = make_client(auth_username_change="always")
    sign_in(client, member)
    before = user_row(db, member)
    snapshot = (before.username, before.name, before.email, before.image, before.email_verified)
    response = client.post(URL, json=body, headers=SAME_ORIGIN)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == code
    after = user_row(db, member)
    assert (after.username, after.name, after.email, after.image, after.email_verified) == snapshot


def test_name_and_image_may_change(auth_client: TestClient, db: Session, staff: Person) -> None:
    sign_in(auth_client, staff)
    response = auth_client.post(
        URL, json={"name": "Grace Hopper", "image": "https://example.com/g.png"}, headers=SAME_ORIGIN
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"status": True}
    row = user_row(db, staff)
    assert (row.name, row.image) == ("Grace Hopper", "https://example.com/g.png")
    session = auth_client.get("/api/auth/get-session").json()
    assert session["user"]["name"] == "Grace Hopper"
    assert auth_client.post(URL, json={"image": None}, headers=SAME_ORIGIN).status_code == 200
    assert user_row(db, staff).image is None


def test_without_this_services_origin_the_cookie_post_is_refused(
    auth_client: TestClient, db: Session, staff: Person
) -> None:
    sign_in(auth_client, staff)
    cases = [
        ({}, "MISSING_OR_NULL_ORIGIN"),
        ({"Origin": "null"}, "MISSING_OR_NULL_ORIGIN"),
        ({"Origin": "https://evil.example"}, "INVALID_ORIGIN"),
        ({"Origin": "http://127.0.0.1:8001"}, "INVALID_ORIGIN"),
        ({"Referer": "https://evil.example/page"}, "INVALID_ORIGIN"),
    ]
    for headers, code in cases:
        response = auth_client.post(URL, json={"name": "Mallory"}, headers=headers)
        assert response.status_code == 403, headers
        assert response.json()["code"] == code
    assert user_row(db, staff).name == "Grace_H"
    # A Referer of this service stands in for a missing Origin, as in better-auth.
    response = auth_client.post(URL, json={"name": "Grace"}, headers={"Referer": "http://127.0.0.1:8000/x"})
    assert response.status_code == 200
