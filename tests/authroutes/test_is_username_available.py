"""POST /api/auth/is-username-available: no session needed, `{"available": bool}` compared lowercase,
422 with better-auth's code for a name that could never be used."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.authroutes.conftest import SAME_ORIGIN, Person, sign_in

URL = "/api/auth/is-username-available"


def test_a_username_in_use_is_not_available_in_any_case(auth_client: TestClient, staff: Person) -> None:
    for name in ("Grace_H", "grace_h", "GRACE_H"):
        response = auth_client.post(URL, json={"username": name})
        assert response.status_code == 200, response.text
        assert response.json() == {"available": False}


def test_an_unused_username_is_available(auth_client: TestClient, staff: Person) -> None:
    response = auth_client.post(URL, json={"username": "nobody.yet_1"})
    assert response.status_code == 200
    assert response.json() == {"available": True}
    assert response.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize(
    ("username", "code", "message"),
    [
        ("ab", "USERNAME_TOO_SHORT", "Username is too short"),
        ("a" * 31, "USERNAME_TOO_LONG", "Username is too long"),
        ("x" * 10_000, "USERNAME_TOO_LONG", "Username is too long"),
        ("", "INVALID_USERNAME", "Username is invalid"),
        ("with space", "INVALID_USERNAME", "Username is invalid"),
        ("grace-h", "INVALID_USERNAME", "Username is invalid"),
        ("gr\u0430ce", "INVALID_USERNAME", "Username is invalid"),  # Cyrillic small a
        ("\uff47\uff52\uff41\uff43\uff45", "INVALID_USERNAME", "Username is invalid"),  # full-width
        ("grace\n", "INVALID_USERNAME", "Username is invalid"),
        ("' OR 1=1 --", "INVALID_USERNAME", "Username is invalid"),
        ("a\x00b", "INVALID_USERNAME", "Username is invalid"),
    ],
)
def test_a_malformed_username_is_422_with_better_auths_code(
    auth_client: TestClient, username: str, code: str, message: str
) -> None:
    response = auth_client.post(URL, json={"username": username})
    assert response.status_code == 422, response.text
    assert response.json() == {"code": code, "message": message}


def test_a_signed_in_browser_may_ask_too(auth_client: TestClient, staff: Person) -> None:
    sign_in(auth_client, staff)
    response = auth_client.post(URL, json={"username": "free_name"}, headers=SAME_ORIGIN)
    assert response.json() == {"available": True}
