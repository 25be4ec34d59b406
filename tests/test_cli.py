"""The `tidings` command, run for real (`python -m app`) against SQLite files in a temporary directory.

Exit status 0 on success; 1 on a user error, with one line on stderr and never a traceback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app.config import Settings
from app.main import create_app
from app.migrate import alembic_config
from tests.processes import free_port

ROOT = Path(__file__).resolve().parent.parent
OWNER = "owner@example.com"


@dataclass
class Place:
    """A database file and a var directory of the command's own; `env` is what the command sees."""

    directory: Path

    @property
    def url(self) -> str:
        return f"sqlite:///{self.directory / 'tidings.db'}"

    @property
    def var_dir(self) -> Path:
        return self.directory / "var"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
        env.update(
            TIDINGS_DATABASE_URL=self.url,
            TIDINGS_VAR_DIR=str(self.var_dir),
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
        )
        env.update(extra)
        return env

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "app", *args],
            cwd=self.directory,  # so neither ./.env nor ./var of the repository is read
            env=self.env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return finish(self.start(*args, **env))

    @contextmanager
    def client(self) -> Iterator[TestClient]:
        settings = Settings(database_url=self.url, var_dir=self.var_dir, secret_key="k" * 40, redis_url="")
        with TestClient(create_app(settings=settings), raise_server_exceptions=False) as client:
            yield client

    def scalar(self, sql: str, **params: object) -> object:
        engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                return conn.execute(text(sql), params).scalar()
        finally:
            engine.dispose()


def finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    )
    assert "Traceback" not in result.stderr
    return result.stdout


def user_error(result: subprocess.CompletedProcess[str]) -> str:
    """Exit status 1, nothing on stdout, one line on stderr and no traceback; returns the line."""
    assert result.returncode == 1, (
        f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    )
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout.strip() == "", result.stdout  # (a progress bar may leave a blank line)
    return lines[0]


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    """A database with one user made by `users create`: the account the other commands work on."""
    made = Place(tmp_path_factory.mktemp("cli"))
    out = ok(made.run("users", "create", "--email", OWNER, "--name", "Owner"))
    assert re.fullmatch(r"\d+\n", out), out
    return made


@pytest.fixture(scope="module")
def token(place: Place) -> str:
    out = ok(place.run("tokens", "create", "--email", OWNER, "--name", "cli test"))
    assert re.fullmatch(r"tdg_[A-Za-z0-9_-]{20,}\n", out), out
    return out.strip()


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_users_create_makes_an_empire_account_with_the_defaults(place: Place) -> None:
    user_id = place.scalar("SELECT id FROM users WHERE email_key = :e", e=OWNER)
    assert isinstance(user_id, int)
    account = "SELECT {} FROM accounts JOIN users ON users.account_id = accounts.id WHERE users.id = :u"
    assert place.scalar(account.format("plan"), u=user_id) == "empire"
    assert place.scalar(account.format("contact_limit"), u=user_id) == 10000
    assert place.scalar(account.format("timezone"), u=user_id) == "UTC"
    assert place.scalar(account.format("warmup_until"), u=user_id) is None


def test_tokens_create_prints_a_token_that_works_against_the_app(place: Place, token: str) -> None:
    with place.client() as client:
        me = client.get("/me", headers=headers(token))
        assert me.status_code == 200, me.text
        assert me.json()["email"] == OWNER
        assert me.json()["name"] == "Owner"
        assert me.json()["contact_limit"] == 10000
        assert client.get("/me", headers=headers(token + "x")).status_code == 401


# Commands that must fail, each on its own: they read the database and write nothing, so they run at once.
FAILING = {
    "taken email": ("users", "create", "--email", OWNER.upper(), "--name", "Again"),
    "bad plan": ("users", "create", "--email", "p@example.com", "--name", "P", "--plan", "gold"),
    "bad timezone": (
        "users",
        "create",
        "--email",
        "t@example.com",
        "--name",
        "T",
        "--timezone",
        "Mars/Olympus",
    ),
    "unknown token owner": ("tokens", "create", "--email", "nobody@example.com"),
    "csv without email": ("contacts", "import", "no-email.csv", "--email", OWNER),
}


@pytest.fixture(scope="module")
def failures(place: Place) -> dict[str, subprocess.CompletedProcess[str]]:
    (place.directory / "no-email.csv").write_text("name,address\nZed,zed@example.com\n", encoding="utf-8")
    started = {name: place.start(*args) for name, args in FAILING.items()}
    return {name: finish(process) for name, process in started.items()}


def test_users_create_with_a_taken_email_exits_1_with_one_line(
    place: Place, failures: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    assert "already exists" in user_error(failures["taken email"])
    assert place.scalar("SELECT count(*) FROM users") == 1


def test_users_create_with_a_bad_plan_or_timezone_exits_1(
    place: Place, failures: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    assert "gold" in user_error(failures["bad plan"])
    assert "Mars/Olympus" in user_error(failures["bad timezone"])
    assert place.scalar("SELECT count(*) FROM users") == 1
    assert place.scalar("SELECT count(*) FROM accounts") == 1


def test_tokens_create_for_an_unknown_email_exits_1(
    failures: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    assert "nobody@example.com" in user_error(failures["unknown token owner"])


def test_contacts_import_without_an_email_column_exits_1(
    place: Place, failures: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    assert "email" in user_error(failures["csv without email"])
    assert place.scalar("SELECT count(*) FROM contacts WHERE email_key = 'zed@example.com'") == 0


def test_db_upgrade_and_current(tmp_path: Path) -> None:
    fresh = Place(tmp_path)
    assert ok(fresh.run("db", "current")).strip() == "(empty database)"
    assert ok(fresh.run("db", "upgrade")).strip() == "database is at head"
    head = ScriptDirectory.from_config(alembic_config(fresh.url)).get_current_head()
    assert head
    assert ok(fresh.run("db", "current")).strip() == head
    assert fresh.scalar("SELECT count(*) FROM users") == 0


def make_list(client: TestClient, token: str, name: str) -> int:
    made = client.post("/lists", json={"name": name}, headers=headers(token))
    assert made.status_code == 200, made.text
    return int(made.json()["id"])


def test_contacts_import_creates_and_updates_by_email(place: Place, token: str, tmp_path: Path) -> None:
    with place.client() as client:
        list_id = make_list(client, token, "Imported")
        existing = client.post(
            "/contacts", json={"email": "existing@example.com", "first_name": "Old"}, headers=headers(token)
        )
        assert existing.status_code == 200, existing.text
    csv_file = tmp_path / "contacts.csv"
    csv_file.write_text(
        "\ufeffEmail,First_Name,last_name,notes\n"  # a byte order mark and mixed-case names, as Excel
        "ann@example.com,Ann,Archer,x\n"
        "BOB@example.com,Bob,,y\n"
        "not-an-email,Bad,,z\n"
        "Existing@Example.com,Changed,,\n"
        ",,,\n",
        encoding="utf-8",
    )
    out = ok(place.run("contacts", "import", str(csv_file), "--email", OWNER, "--list", str(list_id)))
    assert "created 2, updated 1, skipped 2 invalid" in out
    with place.client() as client:
        members = client.get(f"/lists/{list_id}/contacts", headers=headers(token)).json()
        assert sorted(c["email"] for c in members["data"]) == [
            "BOB@example.com",
            "ann@example.com",
            "existing@example.com",
        ]
        by_email = {c["email"]: c for c in members["data"]}
        assert by_email["ann@example.com"]["last_name"] == "Archer"
        assert by_email["existing@example.com"]["first_name"] == "Changed"
        assert client.get("/me", headers=headers(token)).json()["contacts_count"] >= 3


def test_forms_create_prints_the_id_and_public_url(place: Place, token: str) -> None:
    with place.client() as client:
        list_id = make_list(client, token, "Sign-ups")
    out = ok(
        place.run(
            "forms",
            "create",
            "--email",
            OWNER,
            "--title",
            "Join us",
            "--list",
            str(list_id),
            TIDINGS_BASE_URL="https://mail.example.org/",
        )
    )
    match = re.fullmatch(r"(\d+) (\S+)\n", out)
    assert match, out
    form_id = int(match.group(1))
    assert match.group(2) == f"https://mail.example.org/f/{form_id}"
    with place.client() as client:
        form = client.get(f"/forms/{form_id}", headers=headers(token))
        assert form.status_code == 200, form.text
        assert form.json()["title"] == "Join us"


@contextmanager
def serving(place: Place, log: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """`tidings serve --demo` on a free port: yields its base URL and the lines it printed, then stops it."""
    port = free_port()
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--demo", "--port", str(port)],
            cwd=place.directory,
            env=place.env(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            assert process.stdout is not None
            printed: dict[str, str] = {}
            while "Outbox" not in printed:
                line = process.stdout.readline()
                assert line, f"serve exited ({process.poll()}) before printing its token:\n{log.read_text()}"
                label, _, value = line.partition(":")
                printed[label.strip()] = value.strip()
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                assert process.poll() is None, log.read_text()
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            yield base, printed
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_serve_demo_serves_and_prints_the_same_token_every_time(tmp_path: Path) -> None:
    demo = Place(tmp_path)
    with serving(demo, tmp_path / "first.log") as (base, printed):
        assert printed["Demo account"] == "demo@example.com"
        token = printed["API token"]
        assert token.startswith("tdg_")
        assert printed["Docs"] == f"{base}/docs"
        assert printed["Outbox"].startswith(str(demo.var_dir.resolve() / "outbox"))
        health = httpx.get(f"{base}/healthz", timeout=5)
        assert health.json()["status"] == "ok"
        me = httpx.get(f"{base}/me", headers=headers(token), timeout=5)
        assert me.status_code == 200, me.text
        assert me.json()["email"] == "demo@example.com"
        assert httpx.get(f"{base}/me", timeout=5).status_code == 401
    with serving(demo, tmp_path / "second.log") as (base, printed):
        assert printed["API token"] == token
        me = httpx.get(f"{base}/me", headers=headers(token), timeout=5)
        assert me.status_code == 200, me.text
    assert demo.scalar("SELECT count(*) FROM users WHERE email_key = 'demo@example.com'") == 1
    assert demo.scalar("SELECT count(*) FROM personal_tokens") == 1


def test_users_create_sets_a_daily_send_limit(place: Place) -> None:
    email = "capped@example.com"
    ok(place.run("users", "create", "--email", email, "--name", "Capped", "--daily-send-limit", "250"))
    sql = "SELECT daily_send_limit FROM accounts JOIN users ON users.account_id = accounts.id"
    sql += " WHERE email_key = :e"
    assert place.scalar(sql, e=email) == 250
    line = user_error(
        place.run("users", "create", "--email", "neg@example.com", "--name", "N", "--daily-send-limit", "-1")
    )
    assert "daily send limit" in line


def test_worker_once_sends_what_is_due_and_exits(place: Place) -> None:
    out = ok(place.run("worker", "--once"))
    assert re.fullmatch(
        r"sent \d+ emails, polled \d+ feeds, ran \d+ watch runs, delivered \d+ webhook events\n", out
    ), out


def test_worker_logs_json_lines_when_asked(place: Place) -> None:
    result = place.run("worker", "--once", TIDINGS_LOG_FORMAT="json")
    ok(result)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines, "the worker logged nothing"
    for line in lines:
        entry = json.loads(line)
        assert {"time", "level", "logger", "message"} <= set(entry)


def test_production_refuses_a_weak_key_and_an_http_base_url(tmp_path: Path) -> None:
    where = Place(tmp_path)
    line = user_error(where.run("serve", TIDINGS_ENV="production", TIDINGS_SECRET_KEY="short"))
    assert "too weak" in line and "https://" in line
    line = user_error(where.run("worker", "--once", TIDINGS_ENV="production", TIDINGS_SECRET_KEY="k" * 48))
    assert "TIDINGS_BASE_URL" in line and "weak" not in line
    fine = where.run(
        "worker",
        "--once",
        TIDINGS_ENV="production",
        TIDINGS_SECRET_KEY="k" * 48,
        TIDINGS_BASE_URL="https://mail.example.com",
    )
    assert "sent 0 emails, polled 0 feeds, ran 0 watch runs, delivered 0 webhook events" in ok(fine)
