"""better-auth's own JavaScript client (`createAuthClient` with `usernameClient`, the npm package
pinned in tests/authroutes/js) under Node, against a real Tidings server: the four routes of
better-auth's username flow and the session routes answer as that client expects."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.models import User
from tests.authroutes.live import CommittedPerson, committed_person, require, running_server

JS_DIR = Path(__file__).resolve().parent / "js"
PASSWORD = "correct horse battery"


@pytest.fixture
def staff_member(engine: Engine) -> Iterator[CommittedPerson]:
    with committed_person(engine, "client_staff", PASSWORD, is_staff=True) as person:
        yield person


def run_client(base: str, person: CommittedPerson) -> dict[str, Any]:
    node = shutil.which("node")
    require(node is not None, "node is not installed")
    require((JS_DIR / "node_modules" / "better-auth").is_dir(), "run `npm ci` in tests/authroutes/js")
    result = subprocess.run(
        [str(node), "client-check.mjs", base, person.username, person.password],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_better_auths_client_works_against_tidings(
    database_url: str, tmp_path: Path, engine: Engine, staff_member: CommittedPerson
) -> None:
    with running_server(database_url, tmp_path / "var") as base:
        report = run_client(base, staff_member)

    # is-username-available: taken (in another case) and free, and better-auth's 422 code.
    assert report["usernameTaken"] == {"data": {"available": False}, "error": None}
    assert report["usernameFree"] == {"data": {"available": True}, "error": None}
    assert report["usernameTooShort"]["error"] == {
        "status": 422,
        "code": "USERNAME_TOO_SHORT",
        "message": "Username is too short",
    }
    # sign-up/email after sign-up was closed.
    assert report["signUp"]["data"] is None
    assert report["signUp"]["error"] == {
        "status": 400,
        "code": "EMAIL_PASSWORD_SIGN_UP_DISABLED",
        "message": "Email and password sign up is not enabled (TIDINGS_AUTH_SIGNUP_ENABLED=true opens it)",
    }
    # sign-in/username: a wrong password sets no cookie; the right one does.
    assert report["signInWrong"]["error"]["status"] == 401
    assert report["signInWrong"]["error"]["code"] == "INVALID_USERNAME_OR_PASSWORD"
    assert report["cookiesAfterWrongSignIn"] == []
    signed = report["signIn"]["data"]
    assert signed["redirect"] is False
    assert signed["user"]["username"] == "client_staff"
    assert signed["user"]["id"] == str(staff_member.user_id)
    assert report["cookiesAfterSignIn"] == ["tidings.session_token"]
    session = report["session"]["data"]
    assert session["session"]["token"] == signed["token"]
    assert session["user"]["username"] == "client_staff"
    # update-user: a staff member cannot change their username (the default policy); the name changes.
    assert report["updateUsername"]["error"] == {
        "status": 400,
        "code": "USERNAME_IS_IMMUTABLE",
        "message": "Username cannot be updated",
    }
    assert report["updateName"] == {"data": {"status": True}, "error": None}
    assert report["sessionAfterUpdate"]["data"]["user"]["name"] == "Renamed By Client"
    assert report["sessionAfterUpdate"]["data"]["user"]["username"] == "client_staff"
    # sign-out, then nothing works on the old session.
    assert report["signOut"]["data"] == {"success": True}
    assert report["sessionAfterSignOut"] == {"data": None, "error": None}
    assert report["updateSignedOut"]["error"]["status"] == 401

    with Session(engine) as session_db:
        row = session_db.scalars(select(User).where(User.id == staff_member.user_id)).one()
        assert (row.username, row.name) == ("client_staff", "Renamed By Client")
        assert (
            session_db.scalars(select(User).where(User.email_key == "someone.new@example.com")).first()
            is None
        )
