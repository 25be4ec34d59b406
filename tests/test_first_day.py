"""An operator's first day with `tidings serve`, run as a real command from a directory of its own: the
address it serves on is the one its emails and checks use, its data lives in TIDINGS_VAR_DIR whatever
the working directory, the banner says what it uses, and `--demo` prints what the README's walks need
but is refused in production."""

from __future__ import annotations

import email
import email.policy
import mailbox
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, delete, select

from app.config import masked_url, served_base_url
from app.identity.tokens import hash_token
from app.models import Account, DeviceSession, User
from tests.processes import command_environment, free_port, served_command

SECRET = "first-day-test-secret-key-long-enough-to-sign"
DEMO_EMAIL = "demo@example.com"


@pytest.fixture
def demo_cleanup(engine: Engine) -> Iterator[list[str]]:
    """The demo account a served process commits, and the device sessions a test lists, go afterwards
    (the test database is shared with the other tests)."""
    device_codes: list[str] = []
    yield device_codes
    with engine.begin() as conn:
        demo = select(User.account_id).where(User.email_key == DEMO_EMAIL).scalar_subquery()
        conn.execute(delete(Account).where(Account.id == demo))
        hashes = [hash_token(code) for code in device_codes]
        conn.execute(delete(DeviceSession).where(DeviceSession.device_code_hash.in_(hashes)))


def outbox_messages(outbox: Path, count: int) -> list[email.message.EmailMessage]:
    deadline = time.monotonic() + 30
    while True:
        if (outbox / "new").is_dir():
            box = mailbox.Maildir(outbox, create=False)
            keys = list(box.iterkeys())  # iterating a Mailbox yields its messages, not its keys
            if len(keys) >= count:
                return [
                    email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)  # type: ignore[misc]
                    for key in keys
                ]
        assert time.monotonic() < deadline, f"nothing in {outbox} after 30 s"
        time.sleep(0.2)


def test_serve_on_a_port_without_a_base_url_links_emails_and_checks_to_that_port(
    database_url: str, tmp_path: Path, demo_cleanup: list[str]
) -> None:
    """TIDINGS_BASE_URL set but empty is the same as unset: the served address is the public one."""
    port = free_port()
    var = tmp_path / "var"
    env = command_environment(
        TIDINGS_DATABASE_URL=database_url,
        TIDINGS_VAR_DIR=str(var),
        TIDINGS_SECRET_KEY=SECRET,
        TIDINGS_BASE_URL="",
    )
    command = [sys.executable, "-m", "app", "serve", "--demo", "--port", str(port)]
    with served_command(command, port, tmp_path, env, tmp_path / "logs") as served:
        base = served.base
        assert served.printed["Base URL"].startswith(f"{base} ")
        assert served.printed["Docs"] == f"{base}/docs"
        headers = {"Authorization": f"Bearer {served.printed['API token']}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            list_id = http.post("/lists", json={"name": "Port"}).json()["id"]
            contact = http.post("/contacts", json={"email": "port@example.com", "lists": [list_id]})
            assert contact.status_code == 200, contact.text
            campaign = http.post(
                "/campaigns",
                json={
                    "title": "Port",
                    "subject": "Which port",
                    "html": '<p>Hi</p><a href="https://example.com/read">read</a>',
                    "from_name": "Demo",
                    "from_email": "demo@example.com",
                    "lists": [list_id],
                },
            )
            assert campaign.status_code == 201, campaign.text
            sent = http.post(f"/campaigns/{campaign.json()['id']}/send")
            assert sent.status_code == 200, sent.text
            [message] = outbox_messages(var / "outbox", 1)
            html = message.get_body(("html",))
            assert html is not None
            body = html.get_content()
            assert f'src="{base}/t/o/' in body  # the open pixel
            assert f'href="{base}/t/c/' in body  # the tracked link
            assert f'href="{base}/u/' in body  # the unsubscribe link
            assert f"<{base}/u/" in str(message["List-Unsubscribe"])
            assert ":8000" not in message.as_string()

            started = http.post("/v1/auth/device-sessions", headers={"Authorization": ""})
            assert started.status_code == 201, started.text
            demo_cleanup.append(started.json()["device_code"])
            assert started.json()["verification_uri"].startswith(f"{base}/")

        # The printed username and password sign in; cookie POSTs are trusted from this port's Origin.
        with httpx.Client(base_url=base, timeout=30) as browser:
            signed_in = browser.post(
                "/api/auth/sign-in/username",
                json={"username": served.printed["Username"], "password": served.printed["Password"]},
            )
            assert signed_in.status_code == 200, signed_in.text
            assert signed_in.json()["user"]["email"] == served.printed["Demo account"] == DEMO_EMAIL
            stranger = browser.post(
                "/api/auth/update-user", json={"name": "Demo"}, headers={"Origin": "http://127.0.0.1:8000"}
            )
            assert stranger.status_code == 403, stranger.text
            own = browser.post("/api/auth/update-user", json={"name": "Demo"}, headers={"Origin": base})
            assert own.status_code == 200, own.text


def test_serve_keeps_its_database_in_the_var_dir_whatever_the_working_directory(tmp_path: Path) -> None:
    """No TIDINGS_DATABASE_URL and no TIDINGS_BASE_URL at all: the SQLite file is made in
    TIDINGS_VAR_DIR, not under the directory the command runs in, and the banner says so."""
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    elsewhere.mkdir()
    port = free_port()
    env = command_environment(TIDINGS_VAR_DIR=str(data))
    command = [sys.executable, "-m", "app", "serve", "--no-scheduler", "--port", str(port)]
    with served_command(command, port, elsewhere, env, tmp_path / "logs") as served:
        assert (data / "tidings.db").is_file()
        assert not (elsewhere / "var").exists()
        assert served.printed["Database"] == f"sqlite:///{data}/tidings.db"
        assert served.printed["Var dir"] == str(data)
        assert served.printed["Outbox"].startswith(f"{data / 'outbox'} ")
        assert served.printed["Base URL"].startswith(f"http://127.0.0.1:{port} (")
        assert "TIDINGS_BASE_URL behind a proxy" in served.printed["Base URL"]
        assert "Demo account" not in served.printed
        assert httpx.get(f"{served.base}/openapi.yaml", timeout=10).status_code == 200


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=cwd,
        env=command_environment(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_is_refused_in_production(tmp_path: Path) -> None:
    """Even with an otherwise valid production configuration, before anything is migrated or made."""
    result = run(
        ["serve", "--demo", "--port", str(free_port())],
        tmp_path,
        TIDINGS_ENV="production",
        TIDINGS_SECRET_KEY=SECRET,
        TIDINGS_BASE_URL="https://mail.example.com",
        TIDINGS_VAR_DIR=str(tmp_path / "var"),
    )
    assert result.returncode == 1, result
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "--demo" in line and "TIDINGS_ENV=production" in line and "refused" in line
    assert not (tmp_path / "var" / "tidings.db").exists()


def test_a_database_password_is_never_printed(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://tidings:s3cret-word@127.0.0.1:{free_port()}/tidings?connect_timeout=2"
    result = run(["serve", "--port", str(free_port())], tmp_path, TIDINGS_DATABASE_URL=url)
    assert result.returncode == 1, result
    assert "s3cret-word" not in result.stdout + result.stderr
    assert "tidings:***@127.0.0.1" in result.stderr
    assert masked_url("smtps://relay:pw@smtp.example.com:465") == "smtps://relay:***@smtp.example.com:465"
    assert masked_url("sqlite:////srv/var/tidings.db") == "sqlite:////srv/var/tidings.db"


def test_the_served_base_url_names_a_reachable_host() -> None:
    assert served_base_url("127.0.0.1", 48921) == "http://127.0.0.1:48921"
    assert served_base_url("0.0.0.0", 8000) == "http://127.0.0.1:8000"
    assert served_base_url("::", 8000) == "http://127.0.0.1:8000"
    assert served_base_url("::1", 9000) == "http://[::1]:9000"
    assert served_base_url("mail.lan", 8080) == "http://mail.lan:8080"
