"""The sign-in throttle counts an account however it is spelled and whichever route is used: the
identifier is normalized exactly as the lookup normalizes it, and failures are also counted per account,
so the username and the e-mail address share one budget of ten failures."""

from __future__ import annotations

from unittest import mock

import pytest
from fastapi.testclient import TestClient

from app.identity import sign_in as sign_in_module
from app.identity.session_cookie import SESSION_COOKIE
from tests.authroutes.conftest import PASSWORD, SAME_ORIGIN, Person

# Spaces, a tab, a newline, a no-break space, an em space, the ideographic space and a line separator:
# every one of them is stripped by the lookup, so each must land on the same throttle key.
PADDINGS = ["   {}", "{}  ", "\t{}", "{}\n", "\u00a0{}", "\u2003{}\u2003", "\u3000{}", "\u2028{}"]


def fail_by_email(client: TestClient, email: str, times: int) -> None:
    for _ in range(times):
        response = client.post("/v1/auth/login", json={"email": email, "password": "wrong guess"})
        assert response.status_code == 401, response.text


def v1_login(client: TestClient, **credentials: str) -> int:
    return client.post("/v1/auth/login", json=credentials).status_code


def api_sign_in(client: TestClient, username: str, password: str) -> int:
    response = client.post("/api/auth/sign-in/username", json={"username": username, "password": password})
    return response.status_code


def page_sign_in(client: TestClient, username: str, password: str, next_path: str = "/account/tokens") -> int:
    response = client.post(
        "/account/sign-in",
        data={"username": username, "password": password, "next": next_path},
        headers=SAME_ORIGIN,
    )
    return response.status_code


@pytest.mark.parametrize("padding", PADDINGS)
def test_a_padded_spelling_of_a_locked_address_is_the_same_locked_address(
    auth_client: TestClient, member: Person, padding: str
) -> None:
    fail_by_email(auth_client, member.email, 10)
    spelled = padding.format(member.email.upper())
    response = auth_client.post("/v1/auth/login", json={"email": spelled, "password": PASSWORD})
    assert response.status_code == 429, response.text
    assert SESSION_COOKIE not in response.cookies
    assert v1_login(auth_client, email=spelled, password="another guess") == 429


def test_padded_spellings_share_one_budget_of_ten(auth_client: TestClient, member: Person) -> None:
    for index in range(10):
        spelled = PADDINGS[index % len(PADDINGS)].format(member.email)
        assert v1_login(auth_client, email=spelled, password="wrong guess") == 401
    assert v1_login(auth_client, email=member.email, password=PASSWORD) == 429


def test_username_and_email_share_the_account_budget(auth_client: TestClient, member: Person) -> None:
    fail_by_email(auth_client, member.email, 5)
    for _ in range(5):
        assert v1_login(auth_client, username=member.username, password="wrong guess") == 401
    assert v1_login(auth_client, username=member.username, password=PASSWORD) == 429
    assert v1_login(auth_client, email=member.email, password=PASSWORD) == 429


def test_an_account_locked_by_email_is_locked_on_every_route(
    auth_client: TestClient, member: Person, staff: Person
) -> None:
    fail_by_email(auth_client, member.email, 10)
    assert api_sign_in(auth_client, member.username, PASSWORD) == 429
    assert api_sign_in(auth_client, member.username.upper(), PASSWORD) == 429
    assert page_sign_in(auth_client, member.username, PASSWORD) == 429
    # The OAuth consent and device pages sign people in through the same form, going on to themselves.
    assert page_sign_in(auth_client, member.username, PASSWORD, "/oauth/authorize?client_id=x") == 429
    assert page_sign_in(auth_client, member.username, PASSWORD, "/device") == 429
    # Another account behind the same address is not touched.
    assert api_sign_in(auth_client, staff.username, PASSWORD) == 200


def test_failures_on_the_pages_and_the_api_count_together(auth_client: TestClient, member: Person) -> None:
    for _ in range(4):
        assert page_sign_in(auth_client, member.username, "wrong guess") == 401
    for _ in range(3):
        assert api_sign_in(auth_client, member.username, "wrong guess") == 401
    fail_by_email(auth_client, f"  {member.email}", 3)
    assert v1_login(auth_client, email=member.email, password=PASSWORD) == 429


def test_nine_failures_leave_the_right_password_working(auth_client: TestClient, member: Person) -> None:
    fail_by_email(auth_client, member.email, 5)
    for _ in range(4):
        assert api_sign_in(auth_client, member.username, "wrong guess") == 401
    assert v1_login(auth_client, email=f"\t{member.email} ", password=PASSWORD) == 200


@pytest.mark.parametrize("email", ["nobody@example.com", "  nobody@example.com", "NoBody@Example.com\u3000"])
def test_unknown_identifiers_keep_the_equal_work_rule(auth_client: TestClient, email: str) -> None:
    with mock.patch.object(sign_in_module, "verify_password", wraps=sign_in_module.verify_password) as verify:
        assert v1_login(auth_client, email=email, password="guess") == 401
    assert verify.call_count == 1


def test_an_unknown_address_is_throttled_by_its_looked_up_spelling(auth_client: TestClient) -> None:
    fail_by_email(auth_client, "nobody@example.com", 10)
    assert v1_login(auth_client, email=" NOBODY@example.com\u00a0", password="guess") == 429
