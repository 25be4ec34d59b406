"""Real server processes for tests: uvicorn serving the app on a free port of loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session

from app.db import make_write_session_factory
from app.identity.accounts import create_user
from app.identity.tokens import create_personal_token
from app.models import Account


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served_app(database_url: str, var_dir: Path, **env: str) -> Iterator[str]:
    """The app as `uvicorn --factory` serves it; yields its base URL. Fails the test on a traceback."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    environment = {
        **os.environ,
        "TIDINGS_DATABASE_URL": database_url,
        # Its own address is its public one: links in emails and the Origin trusted for cookie POSTs.
        "TIDINGS_BASE_URL": base,
        "TIDINGS_VAR_DIR": str(var_dir),
        "TIDINGS_SECRET_KEY": "server-test-secret-key-long-enough-to-sign",
        "TIDINGS_MAIL_RATE_LIMIT": "100000/minute",
        # HTTP only unless a test asks for background work: the jobs' writes would otherwise race the
        # test's own writes to a shared SQLite file.
        "TIDINGS_SCHEDULER": "false",
        **env,
    }
    command = [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory", "--port", str(port)]
    process = subprocess.Popen([*command, "--log-level", "warning"], env=environment, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                pytest.fail("the server did not start")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=15)
        assert b"Traceback" not in stderr, stderr.decode()[-3000:]


@contextmanager
def committed_users(engine: Engine, *emails: str) -> Iterator[list[tuple[int, str]]]:
    """Users whose rows are really committed (a server in another process must see them), each with
    a token: yields [(account_id, token)] and removes their accounts afterwards."""
    made: list[tuple[int, str]] = []
    # A writer's transaction from the start (BEGIN IMMEDIATE on SQLite), as the app's own writes are: a
    # transaction that read first cannot take the write lock once a server process has committed since.
    with make_write_session_factory(engine)() as session:
        for email in emails:
            user = create_user(session, email=email, name="Committed", contact_limit=1_000_000)
            _, token = create_personal_token(session, user)
            made.append((user.account_id, token))
        session.commit()
    try:
        yield made
    finally:
        with Session(engine) as session:
            session.execute(delete(Account).where(Account.id.in_([account_id for account_id, _ in made])))
            session.commit()


def command_environment(**env: str) -> dict[str, str]:
    """This process's environment without any TIDINGS_ setting or PYTHONPATH, plus `env`: what an
    operator's shell holds when it has set only those."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_") and k != "PYTHONPATH"}
    return {**kept, "PYTHONUNBUFFERED": "1", **env}


@dataclass
class ServedCommand:
    base: str
    # The `Label: value` lines the command printed before it served.
    printed: dict[str, str]


@contextmanager
def served_command(
    command: list[str], port: int, cwd: Path, env: dict[str, str], logs: Path
) -> Iterator[ServedCommand]:
    """A `tidings serve ... --port PORT` command as an operator runs it, in `cwd`: waits until
    http://127.0.0.1:PORT/healthz answers, yields, then stops it; fails the test on a traceback."""
    base = f"http://127.0.0.1:{port}"
    logs.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = logs / "stdout.txt", logs / "stderr.txt"
    with stdout_path.open("w") as stdout, stderr_path.open("w") as stderr:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=stdout, stderr=stderr)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                pytest.fail(
                    f"the server did not start:\n{stdout_path.read_text()}\n{stderr_path.read_text()}"
                )
            time.sleep(0.1)
        printed = {}
        for line in stdout_path.read_text().splitlines():
            label, _, value = line.partition(":")
            printed[label.strip()] = value.strip()
        yield ServedCommand(base, printed)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        assert "Traceback" not in stderr_path.read_text(), stderr_path.read_text()[-3000:]
