"""/account/device: the page behind a device session's verification_uri, where a person signed in on
this service types the command line's code and approves or denies it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.authroutes.conftest import SAME_ORIGIN, Person
from tests.v1auth.test_device_sessions import let_time_pass, poll, sign_in, start


def submit(client: TestClient, code: str, decision: str = "approve", **headers: str) -> Any:
    return client.post(
        "/account/device",
        data={"user_code": code, "decision": decision},
        headers={**SAME_ORIGIN, **headers},
    )


def test_verification_uri_is_the_page_and_it_sends_strangers_to_sign_in(auth_client: TestClient) -> None:
    started = start(auth_client)
    assert started["verification_uri"].endswith("/account/device")
    response = auth_client.get("/account/device", params={"user_code": started["user_code"].lower()})
    assert response.status_code == 303
    # After signing in, the person comes back to the page with the code already typed.
    assert response.headers["location"] == (
        "/account/sign-in?next=%2Faccount%2Fdevice%3Fuser_code%3D" + started["user_code"]
    )
    refused = auth_client.post(
        "/account/device", data={"user_code": started["user_code"]}, headers=SAME_ORIGIN
    )
    assert refused.status_code == 303
    assert poll(auth_client, started["device_code"]).json()["error"] == "authorization_pending"


@pytest.fixture
def command_line(make_client: Callable[..., TestClient]) -> TestClient:
    """The command line's own client: it never holds the browser's session cookie."""
    return make_client()


def test_approving_on_the_page_gives_the_command_line_its_token(
    auth_client: TestClient, command_line: TestClient, member: Person, db: Session
) -> None:
    started = start(command_line)
    sign_in(auth_client, member)
    page = auth_client.get("/account/device", params={"user_code": started["user_code"]})
    assert page.status_code == 200
    assert f'value="{started["user_code"]}"' in page.text
    assert '<label for="user-code">' in page.text and page.headers["x-frame-options"] == "DENY"
    typed = started["user_code"].replace("-", " ").lower()
    approved = submit(auth_client, typed)
    assert approved.status_code == 200, approved.text
    assert "Command line approved" in approved.text
    let_time_pass(db)
    done = poll(command_line, started["device_code"])
    assert done.status_code == 200, done.text
    assert done.json()["user"]["id"] == str(member.user_id)
    token = done.json()["access_token"]
    me = command_line.get("/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200 and me.json()["id"] == str(member.user_id)
    again = submit(auth_client, started["user_code"])
    assert again.status_code == 409 and 'role="alert"' in again.text


def test_denying_on_the_page_refuses_the_command_line(
    auth_client: TestClient, command_line: TestClient, member: Person, db: Session
) -> None:
    started = start(command_line)
    sign_in(auth_client, member)
    denied = submit(auth_client, started["user_code"], "deny")
    assert denied.status_code == 200 and "Command line denied" in denied.text
    let_time_pass(db)
    assert poll(command_line, started["device_code"]).json()["error"] == "access_denied"


@pytest.mark.parametrize(
    ("code", "decision", "status"),
    [
        ("BCDF-GHJK", "approve", 404),  # no session has it
        ("", "approve", 404),
        ("x" * 5000, "approve", 404),  # cut to the field's length, never stored
        ("<script>", "approve", 404),
        ("BCDF-GHJK", "maybe", 400),
        ("BCDF-GHJK", "", 400),
    ],
)
def test_bad_codes_and_decisions_are_4xx_pages(
    auth_client: TestClient, command_line: TestClient, member: Person, code: str, decision: str, status: int
) -> None:
    started = start(command_line)
    sign_in(auth_client, member)
    response = submit(auth_client, code, decision)
    assert response.status_code == status
    assert 'role="alert"' in response.text and "<script>" not in response.text
    assert poll(command_line, started["device_code"]).json()["error"] == "authorization_pending"


def test_an_expired_session_cannot_be_approved(
    auth_client: TestClient, command_line: TestClient, member: Person, db: Session
) -> None:
    from datetime import timedelta

    from app.kit.time import utcnow

    started = start(command_line)
    sign_in(auth_client, member)
    let_time_pass(db, expires_at=utcnow() - timedelta(seconds=1))
    response = submit(auth_client, started["user_code"])
    assert response.status_code == 400 and "expired" in response.text


def test_the_page_takes_no_posts_from_other_sites(
    auth_client: TestClient, command_line: TestClient, member: Person
) -> None:
    started = start(command_line)
    sign_in(auth_client, member)
    forged = submit(auth_client, started["user_code"], Origin="https://evil.example")
    assert forged.status_code == 403
    assert poll(command_line, started["device_code"]).json()["error"] == "authorization_pending"


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data; boundary=xyz", b"garbage--xyz\r\n\r\n"),
        ("multipart/form-data", b"\x00\x01"),
        ("application/x-www-form-urlencoded", b"%%%\xff\xfe=1&&="),
        ("application/json", b'{"user_code": "BCDF-GHJK", "decision": "approve"}'),
        ("text/plain", b"\xff" * 100),
    ],
)
def test_garbage_bodies_are_4xx_and_approve_nothing(
    auth_client: TestClient, command_line: TestClient, member: Person, content_type: str, body: bytes
) -> None:
    started = start(command_line)
    sign_in(auth_client, member)
    response = auth_client.post(
        "/account/device", content=body, headers={**SAME_ORIGIN, "Content-Type": content_type}
    )
    assert 400 <= response.status_code < 500
    assert poll(command_line, started["device_code"]).json()["error"] == "authorization_pending"
