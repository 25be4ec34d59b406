"""A person in headless Chromium (Debian's `chromium`, driven by Playwright; no browser is downloaded):
signing in on the OAuth consent page, approving, the client exchanging the code and calling the email
API; creating and revoking a token on /account/tokens; and approving a command line on /account/device."""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.identity.oauth.clients import register_client
from app.models import User
from tests.authroutes.live import CommittedPerson, committed_person, free_port, running_server

PASSWORD = "correct horse battery"


@pytest.fixture
def person(engine: Engine) -> Iterator[CommittedPerson]:
    with committed_person(engine, "browser_user", PASSWORD) as made:
        yield made


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[str]:
    with running_server(database_url, tmp_path / "var") as base:
        yield base


class Callback(BaseHTTPRequestHandler):
    """The integration's redirect URI: remembers the query it was called with."""

    received: list[str] = []

    def do_GET(self) -> None:
        Callback.received.append(self.path)
        body = b"<!doctype html><title>Zap</title><h1>Connected</h1>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def callback_url() -> Iterator[str]:
    Callback.received = []
    port = free_port()
    httpd = HTTPServer(("127.0.0.1", port), Callback)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/callback"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_sign_in_and_approve_on_the_consent_page_then_call_the_email_api(
    browser: Any, server: str, person: CommittedPerson, engine: Engine, callback_url: str, tmp_path: Path
) -> None:
    with Session(engine) as session:
        client, secret = register_client(
            session, session.get_one(User, person.user_id), "Zap Automations", [callback_url]
        )
        client_id = client.client_id
        session.commit()
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": callback_url,
        "state": "opaque-state",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    page = browser.new_page()
    page.goto(f"{server}/oauth/authorize?{urlencode(query)}")
    assert "Zap Automations" in page.text_content("main")
    page.get_by_label("Username").fill(person.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("h1:has-text('Allow Zap Automations')")
    page.screenshot(path=str(tmp_path / "consent.png"))
    page.get_by_role("button", name="Allow").click()
    page.wait_for_url(f"{callback_url}?*")
    assert page.text_content("h1") == "Connected"

    calls = [path for path in Callback.received if path.startswith("/callback")]
    assert len(calls) == 1, Callback.received
    params = parse_qs(urlsplit(calls[0]).query)
    assert params["state"] == ["opaque-state"]
    token = httpx.post(
        f"{server}/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": params["code"][0],
            "redirect_uri": callback_url,
            "code_verifier": verifier,
        },
        auth=(client_id, secret or ""),
    )
    assert token.status_code == 200, token.text
    access = token.json()["access_token"]
    me = httpx.get(f"{server}/me", headers={"Authorization": f"Bearer {access}"})
    assert me.status_code == 200, me.text
    assert me.json()["id"] == person.user_id


def test_create_and_revoke_a_token_on_the_tokens_page(
    browser: Any, server: str, person: CommittedPerson, tmp_path: Path
) -> None:
    page = browser.new_page()
    page.goto(f"{server}/account/tokens")
    # Not signed in yet: the sign-in page, which then leads back here.
    page.get_by_label("Username").fill(person.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("h1:has-text('Personal access tokens')")
    page.get_by_label("Name (what will use it)").fill("my laptop")
    page.get_by_role("button", name="Create token").click()
    page.wait_for_selector("#token-value")
    page.screenshot(path=str(tmp_path / "tokens.png"))
    token = (page.text_content("#token-value") or "").strip()
    assert token.startswith("tdg_")
    bearer = {"Authorization": f"Bearer {token}"}
    me = httpx.get(f"{server}/me", headers=bearer)
    assert me.status_code == 200, me.text
    assert me.json()["id"] == person.user_id

    page.goto(f"{server}/account/tokens")
    assert "my laptop" in page.text_content("table")
    assert token not in page.content()
    page.get_by_role("button", name="Revoke my laptop").click()
    page.wait_for_selector("text=You have no tokens")
    assert httpx.get(f"{server}/me", headers=bearer).status_code == 401


def test_a_person_approves_a_command_line_on_the_device_page(
    browser: Any, server: str, person: CommittedPerson, tmp_path: Path
) -> None:
    started = httpx.post(f"{server}/v1/auth/device-sessions").json()
    assert started["verification_uri"] == f"{server}/account/device"
    page = browser.new_page()
    # As the command line tells the person: open the page, sign in, type the code.
    page.goto(started["verification_uri"])
    page.get_by_label("Username").fill(person.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("h1:has-text('Sign in a command line')")
    page.get_by_label("Code").fill(started["user_code"].lower().replace("-", ""))
    page.screenshot(path=str(tmp_path / "device.png"))
    page.get_by_role("button", name="Approve").click()
    page.wait_for_selector("h1:has-text('Command line approved')")
    answer = httpx.post(
        f"{server}/v1/auth/device-sessions/token", json={"device_code": started["device_code"]}
    )
    assert answer.status_code == 200, answer.text
    token = answer.json()["access_token"]
    me = httpx.get(f"{server}/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200 and me.json()["id"] == str(person.user_id)
