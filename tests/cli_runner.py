"""The `tidings` command run in-process (typer's CliRunner) against the test database, SQLite or
PostgreSQL: its writes are committed, so the `tidings` fixture removes the accounts a test made."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from sqlalchemy import Engine, delete, func, select, text
from typer.testing import CliRunner

from app.cli import cli
from app.models import Account


@dataclass
class Tidings:
    database_url: str
    engine: Engine
    directory: Path

    def env(self, **extra: str) -> dict[str, str | None]:
        # Unset every TIDINGS_ setting of the calling shell, then give the command its own.
        env: dict[str, str | None] = {key: None for key in os.environ if key.startswith("TIDINGS_")}
        env.update(
            TIDINGS_DATABASE_URL=self.database_url,
            TIDINGS_VAR_DIR=str(self.directory / "var"),
            TIDINGS_BASE_URL="https://mail.example.org",
        )
        env.update(extra)
        return env

    def __call__(self, *args: str, input: str | None = None, **env: str) -> Result:
        return CliRunner().invoke(cli, list(args), input=input, env=self.env(**env), catch_exceptions=False)

    def ok(self, *args: str, input: str | None = None) -> str:
        result = self(*args, input=input)
        assert result.exit_code == 0, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def fails(self, *args: str, input: str | None = None) -> str:
        """Exit status 1, nothing on stdout; returns the last line on stderr (the error)."""
        result = self(*args, input=input)
        assert result.exit_code == 1, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
        assert result.stdout == "", result.stdout
        line = result.stderr.strip().splitlines()[-1]
        assert line.startswith("error: "), result.stderr
        return line

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(text(sql), params).scalar()


def table(stdout: str) -> list[dict[str, str]]:
    """A printed table as rows by header (cells are split on runs of two or more spaces)."""
    lines = stdout.rstrip("\n").splitlines()
    headers = re.split(r"\s{2,}", lines[0].strip())
    return [dict(zip(headers, re.split(r"\s{2,}", line.strip()), strict=False)) for line in lines[1:]]


@pytest.fixture(name="tidings")
def tidings_fixture(
    database_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Tidings]:
    monkeypatch.chdir(tmp_path)  # no ./.env of the repository is read
    with engine.connect() as conn:
        before = conn.execute(select(func.coalesce(func.max(Account.id), 0))).scalar_one()
    yield Tidings(database_url, engine, tmp_path)
    with engine.begin() as conn:
        conn.execute(delete(Account).where(Account.id > before))
