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


SECRET_KEY = "server-test-secret-key-long-enough-to-sign"


def environment(database_url: str, var_dir: Path, base: str, **env: str) -> dict[str, str]:
    """The environment of a server or worker process of the tests: this database and var folder, a
    fixed secret key (so links signed by one process open in another), and `env` on top."""
    return {
        **os.environ,
        "TIDINGS_DATABASE_URL": database_url,
        # Its own address is its public one: links in emails and the Origin trusted for cookie POSTs.
        "TIDINGS_BASE_URL": base,
        "TIDINGS_VAR_DIR": str(var_dir),
        "TIDINGS_SECRET_KEY": SECRET_KEY,
        "TIDINGS_MAIL_RATE_LIMIT": "100000/minute",
        **env,
    }


def tidings_script() -> str:
    """The `tidings` console script that `pip install` put beside this Python: what people run."""
    script = Path(sys.executable).with_name("tidings")
    if not script.exists():
        pytest.fail(f"no console script at {script}: install the project (pip install -e '.[test]')")
    return str(script)


@dataclass
class Running:
    """A process of the tests: its base URL (servers only) and everything it printed."""

    process: subprocess.Popen[bytes]
    log_path: Path
    base: str = ""

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, characters: int = 3000) -> str:
        return self.output()[-characters:]


@contextmanager
def running(
    command: list[str],
    env: dict[str, str],
    log_path: Path,
    base: str = "",
    *,
    cwd: Path | None = None,
    start_seconds: float = 30,
) -> Iterator[Running]:
    """Runs `command` (in `cwd`) with its output, stdout and stderr, in `log_path` (a file, not a pipe:
    a chatty process never blocks on a full pipe), waits up to `start_seconds` for `base`/healthz when
    given, and stops it with SIGTERM at the end. Fails the test when it did not start, and when it
    printed a traceback at any time."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    found = Running(process, log_path, base)
    try:
        deadline = time.monotonic() + start_seconds
        while base:
            try:
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                pytest.fail(f"the server did not start:\n{found.tail()}")
            time.sleep(0.1)
        yield found
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail(f"{command[-1]} did not stop on SIGTERM:\n{found.tail()}")
        assert "Traceback" not in found.output(), found.tail()


@contextmanager
def served_app(database_url: str, var_dir: Path, **env: str) -> Iterator[str]:
    """The app as `uvicorn --factory` serves it; yields its base URL. Fails the test on a traceback."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # HTTP only unless a test asks for background work: the jobs' writes would otherwise race the
    # test's own writes to a shared SQLite file.
    environment_ = environment(database_url, var_dir, base, **{"TIDINGS_SCHEDULER": "false", **env})
    command = [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory", "--port", str(port)]
    log_path = var_dir.parent / f"uvicorn-{port}.log"
    with running([*command, "--log-level", "warning"], environment_, log_path, base):
        yield base


@contextmanager
def shipped_serve(database_url: str, var_dir: Path, *options: str, **env: str) -> Iterator[Running]:
    """`tidings serve` as shipped: the installed console script, which migrates, then serves on
    uvicorn's default loop (uvloop, installed by uvicorn[standard]) with its own scheduler on (unless
    `--no-scheduler` is among `options`)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [tidings_script(), "serve", "--host", "127.0.0.1", "--port", str(port), *options]
    log_path = var_dir.parent / f"serve-{port}.log"
    with running(command, environment(database_url, var_dir, base, **env), log_path, base) as served:
        yield served


@contextmanager
def shipped_worker(database_url: str, var_dir: Path, base: str, **env: str) -> Iterator[Running]:
    """`tidings worker` as shipped (the installed console script, on asyncio's loop: see app.cli.worker),
    for the server at `base` (the public address written into emails)."""
    log_path = var_dir.parent / f"worker-{free_port()}.log"
    env_ = environment(database_url, var_dir, base, **env)
    with running([tidings_script(), "worker"], env_, log_path) as worker:
        yield worker


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
    with running(command, env, logs / "output.txt", base, cwd=cwd, start_seconds=60) as served:
        printed = {}
        for line in served.output().splitlines():
            label, _, value = line.partition(":")
            printed[label.strip()] = value.strip()
        yield ServedCommand(base, printed)
