"""A real Tidings server process for the tests that drive it from outside (better-auth's JavaScript
client, a headless browser), and users committed for it to see (it is another process, so the test's
rolled-back transaction is invisible to it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session

from app.db import make_write_session_factory
from app.identity.accounts import create_user
from app.models import Account
from tests.processes import free_port, served_app

__all__ = ["CommittedPerson", "committed_person", "free_port", "require", "running_server"]


def require(condition: bool, reason: str) -> None:
    """Skip a test whose tool is missing on a developer's machine; in CI (`.ci/run` installs the tools) a
    missing tool is a failure, never a silent skip."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must have it: see .ci/run)")
    pytest.skip(reason)


def running_server(database_url: str, var_dir: Path, **env: str) -> AbstractContextManager[str]:
    """The app served as in production, its own base URL trusted as the Origin of cookie POSTs."""
    return served_app(database_url, var_dir, **env)


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
    with make_write_session_factory(engine)() as session:  # a writer from the start (see processes.py)
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
