"""The command-line device session: start, approve with the user code, poll for the one token."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session

from app.kit.time import utcnow
from app.models import DeviceSession
from tests.authroutes.conftest import SAME_ORIGIN, Person


def start(client: TestClient) -> dict[str, Any]:
    response = client.post("/v1/auth/device-sessions")
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def poll(client: TestClient, device_code: str) -> Any:
    return client.post("/v1/auth/device-sessions/token", json={"device_code": device_code})


def let_time_pass(db: Session, **shift: Any) -> None:
    db.execute(update(DeviceSession).values(last_polled_at=utcnow() - timedelta(seconds=60), **shift))
    db.commit()


def sign_in(client: TestClient, person: Person) -> None:
    response = client.post("/v1/auth/login", json={"email": person.email, "password": person.password})
    assert response.status_code == 200


def test_the_whole_flow(auth_client: TestClient, member: Person, db: Session) -> None:
    started = start(auth_client)
    seed_keys = {"device_code", "user_code", "verification_uri", "expires_in", "interval"}
    # openmagpie's keys beside them (tests/test_magpie_cli.py logs its command line in with them).
    assert set(started) == seed_keys | {"session_id", "authorize_url", "device_secret"}
    assert started["device_secret"] == started["device_code"]
    assert len(started["user_code"]) == 9 and started["user_code"][4] == "-"
    assert len(started["device_code"]) >= 40
    assert started["expires_in"] == 600
    assert started["interval"] == 5
    pending = poll(auth_client, started["device_code"])
    assert pending.status_code == 400
    assert pending.json()["error"] == "authorization_pending"
    assert poll(auth_client, started["device_code"]).json()["error"] == "slow_down"

    sign_in(auth_client, member)
    typed = started["user_code"].lower().replace("-", " ")
    done = auth_client.post(f"/v1/auth/device-sessions/{typed}/complete", headers=SAME_ORIGIN)
    assert done.status_code == 200
    assert done.json() == {"status": "approved"}
    again = auth_client.post(f"/v1/auth/device-sessions/{started['user_code']}/complete", headers=SAME_ORIGIN)
    assert again.status_code == 409

    auth_client.cookies.clear()
    let_time_pass(db)
    answer = poll(auth_client, started["device_code"])
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["token_type"] == "bearer"
    assert body["user"]["id"] == str(member.user_id)
    assert body["user"]["account_id"] == str(member.account_id)
    me = auth_client.get("/v1/auth/me", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert me.status_code == 200
    # One token, issued once.
    let_time_pass(db)
    second = poll(auth_client, started["device_code"])
    assert second.status_code == 400
    assert second.json()["error"] == "invalid_grant"


def test_codes_are_stored_hashed(auth_client: TestClient, db: Session) -> None:
    started = start(auth_client)
    # Other tests' servers (the schemathesis run) may have left device sessions of their own.
    rows = db.query(DeviceSession).all()
    assert rows
    for row in rows:
        assert started["device_code"] not in (row.device_code_hash, row.user_code_hash)
        assert started["user_code"] not in (row.device_code_hash, row.user_code_hash)


def test_denied(auth_client: TestClient, member: Person, db: Session) -> None:
    started = start(auth_client)
    sign_in(auth_client, member)
    denied = auth_client.post(
        f"/v1/auth/device-sessions/{started['user_code']}/complete",
        json={"approve": False},
        headers=SAME_ORIGIN,
    )
    assert denied.json() == {"status": "denied"}
    auth_client.cookies.clear()
    let_time_pass(db)
    assert poll(auth_client, started["device_code"]).json()["error"] == "access_denied"


def test_expired(auth_client: TestClient, member: Person, db: Session) -> None:
    started = start(auth_client)
    let_time_pass(db, expires_at=utcnow() - timedelta(seconds=1))
    assert poll(auth_client, started["device_code"]).json()["error"] == "expired_token"
    sign_in(auth_client, member)
    late = auth_client.post(f"/v1/auth/device-sessions/{started['user_code']}/complete", headers=SAME_ORIGIN)
    assert late.status_code == 400
    assert late.json()["error"] == "expired_token"


def test_unknown_codes(auth_client: TestClient, member: Person) -> None:
    assert poll(auth_client, "nope").json()["error"] == "invalid_grant"
    assert auth_client.post("/v1/auth/device-sessions/BCDF-GHJK/complete").status_code == 401
    sign_in(auth_client, member)
    for code in ("BCDF-GHJK", "x", "%00"):
        response = auth_client.post(f"/v1/auth/device-sessions/{code}/complete", headers=SAME_ORIGIN)
        assert response.status_code == 404, (code, response.text)
        assert response.json()["error"] == "not_found"


def test_completing_needs_this_services_origin_with_a_cookie(auth_client: TestClient, member: Person) -> None:
    started = start(auth_client)
    sign_in(auth_client, member)
    response = auth_client.post(
        f"/v1/auth/device-sessions/{started['user_code']}/complete",
        headers={"Origin": "https://evil.example"},
    )
    assert response.status_code == 403
