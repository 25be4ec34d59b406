"""The request's sessions and the side transaction (app/db.py): what each commits, and when.

Routes added to the real app for the test write TelemetrySetting rows (a table nothing else in these
tests touches) and then return or fail; the rows left afterwards say which transaction committed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import PsycopgStatement
from app.kit.errors import DomainError
from app.kit.release import installed_version
from app.main import create_app
from app.models import TelemetrySetting
from app.request_sessions import ReadSessionDep, SessionDep, WriteSessionDep, side_transaction


def _row(session: Session, row_id: int) -> None:
    session.add(TelemetrySetting(id=row_id, mode="off", installation_id=f"test-{row_id}"))
    session.flush()


def _ids(db: Session) -> set[int]:
    db.expire_all()
    return set(db.scalars(select(TelemetrySetting.id).where(TelemetrySetting.id >= 100)))


@pytest.fixture
def routed(app: FastAPI) -> FastAPI:
    @app.post("/_test/request/{row_id}")
    def request_write(row_id: int, session: SessionDep, fail: bool = False) -> dict[str, Any]:
        _row(session, row_id)
        if fail:
            raise RuntimeError("the route fails after its write")
        return {}

    @app.get("/_test/write/{row_id}")
    def write_on_get(row_id: int, session: WriteSessionDep, fail: bool = False) -> dict[str, Any]:
        _row(session, row_id)
        if fail:
            raise DomainError(409, "refused after the write")
        return {}

    @app.post("/_test/read")
    def read_on_post(session: ReadSessionDep) -> dict[str, Any]:
        return {"ids": sorted(session.scalars(select(TelemetrySetting.id)))}

    @app.post("/_test/side/{row_id}")
    def side_then_fail(row_id: int, request: Request, session: SessionDep) -> dict[str, Any]:
        # The side transaction first, as authentication's is: the tests' sessions share one connection
        # (a savepoint each), so one begun inside the request's would be undone with it.
        with side_transaction(request) as side:
            _row(side, row_id + 1)
        _row(session, row_id)
        raise RuntimeError("the request fails after the side transaction")

    @app.post("/_test/side-raises/{row_id}")
    def side_raises(row_id: int, request: Request, kind: str) -> dict[str, Any]:
        error = DomainError(400, "an answer that is an error") if kind == "domain" else RuntimeError("bug")
        with side_transaction(request, commit_despite=(DomainError,)) as side:
            _row(side, row_id)
            raise error

    return app


@pytest.fixture
def test_client(routed: FastAPI) -> Any:
    with TestClient(routed, raise_server_exceptions=False) as client:
        yield client


def test_the_request_session_commits_when_the_route_returns(test_client: TestClient, db: Session) -> None:
    assert test_client.post("/_test/request/100").status_code == 200
    assert _ids(db) == {100}


def test_the_request_session_rolls_back_when_the_route_raises(test_client: TestClient, db: Session) -> None:
    assert test_client.post("/_test/request/100", params={"fail": "true"}).status_code == 500
    assert _ids(db) == set()


def test_the_write_session_commits_on_a_get(test_client: TestClient, db: Session) -> None:
    assert test_client.get("/_test/write/110").status_code == 200
    assert _ids(db) == {110}


def test_the_write_session_rolls_back_on_an_error(test_client: TestClient, db: Session) -> None:
    refused = test_client.get("/_test/write/110", params={"fail": "true"})
    assert refused.status_code == 409
    assert refused.json() == {"message": "refused after the write"}
    assert _ids(db) == set()


def test_the_read_session_reads_on_a_post(test_client: TestClient, db: Session) -> None:
    _row(db, 120)
    db.commit()
    answer = test_client.post("/_test/read")
    assert answer.status_code == 200
    assert 120 in answer.json()["ids"]


def test_the_side_transaction_stands_when_the_request_then_fails(
    test_client: TestClient, db: Session
) -> None:
    assert test_client.post("/_test/side/130").status_code == 500
    # The request's own write (130) is rolled back; the side transaction's (131) was committed.
    assert _ids(db) == {131}


def test_the_side_transaction_commits_despite_the_errors_it_is_told(
    test_client: TestClient, db: Session
) -> None:
    answer = test_client.post("/_test/side-raises/140", params={"kind": "domain"})
    assert answer.status_code == 400
    assert _ids(db) == {140}


def test_the_side_transaction_rolls_back_on_any_other_error(test_client: TestClient, db: Session) -> None:
    assert test_client.post("/_test/side-raises/150", params={"kind": "bug"}).status_code == 500
    assert _ids(db) == set()


def test_healthz_answers_503_when_the_database_is_unreachable(tmp_path: Path) -> None:
    # Nothing listens on port 1: the request's session fails at its first statement, and the answer says so.
    settings = Settings(
        database_url="postgresql+psycopg://tidings@127.0.0.1:1/tidings",
        secret_key="test-secret-key-that-is-long-enough-for-tests",
        var_dir=tmp_path / "var",
        scheduler=False,
        redis_url="",
    )
    with TestClient(create_app(settings=settings), raise_server_exceptions=False) as client:
        health = client.get("/healthz")
    assert health.status_code == 503
    assert health.json() == {
        "status": "error",
        "database": "OperationalError",
        "version": installed_version(),
    }


def test_a_psycopg_statement_sends_the_parameters_it_is_told_in_binary() -> None:
    statement = select(TelemetrySetting.id).where(
        TelemetrySetting.id == bindparam("wanted"), TelemetrySetting.mode == bindparam("mode")
    )
    compiled = PsycopgStatement.of(statement, binary=("wanted",))
    assert "%(wanted)b" in compiled.sql and "%(mode)s" in compiled.sql
    assert "%(wanted)s" not in compiled.sql
    with pytest.raises(ValueError, match="no parameter 'absent'"):
        PsycopgStatement.of(statement, binary=("absent",))
