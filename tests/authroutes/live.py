"""A real Tidings server process for the tests that drive it from outside (better-auth's JavaScript
client, a headless browser), and users committed for it to see (it is another process, so the test's
rolled-back transaction is invisible to it)."""

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

from app.identity.accounts import create_user
from app.models import Account

ROOT = Path(__file__).resolve().parents[2]


def require(condition: bool, reason: str) -> None:
    """Skip a test whose tool is missing on a developer's machine; in CI (`.ci/run` installs the tools) a
    missing tool is a failure, never a silent skip."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must have it: see .ci/run)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_server(database_url: str, var_dir: Path, **env: str) -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process_env = {
        **os.environ,
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_VAR_DIR": str(var_dir),
        "TIDINGS_SECRET_KEY": "live-auth-test-secret-key-long-enough",
        "TIDINGS_BASE_URL": base,
        "TIDINGS_SCHEDULER": "false",
        **env,
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "app.main:create_app",
            "--factory",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=process_env,
        cwd=ROOT,
        stderr=subprocess.PIPE,
    )
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


@dataclass
class CommittedPerson:
    user_id: int
    account_id: int
    username: str
    password: str


@contextmanager
def committed_person(
    engine: Engine, username: str, password: str, **options: object
) -> Iterator[CommittedPerson]:
    """A user really committed, removed with everything of theirs afterwards."""
    with Session(engine) as session:
        user = create_user(
            session,
            email=f"{username}@example.com",
            name=username,
            username=username,
            password=password,
            **options,  # type: ignore[arg-type]
        )
        person = CommittedPerson(user.id, user.account_id, username, password)
        session.commit()
    try:
        yield person
    finally:
        with Session(engine) as session:
            session.execute(delete(Account).where(Account.id == person.account_id))
            session.commit()
