"""Engine, session factory, `transaction()` for jobs, and the places where SQLite and PostgreSQL differ."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from anyio import CancelScope
from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

# Execution option a session sets to open its SQLite transaction with BEGIN IMMEDIATE. A write that
# starts as a read under a deferred BEGIN fails with SQLITE_BUSY_SNAPSHOT when another writer committed
# in between, without waiting for the busy timeout; taking the write lock up front makes writers queue.
SQLITE_IMMEDIATE = "tidings_sqlite_immediate"


def is_sqlite_url(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def create_db_engine(url: str, **kwargs: Any) -> Engine:
    if is_sqlite_url(url):
        return _create_sqlite_engine(url, **kwargs)
    # Under load about as many requests hold a connection as there are worker threads (anyio's 40). Keeping
    # them all open, with the same ceiling as before (10 + 30 overflow), saves starting and ending a
    # PostgreSQL backend for most requests: overflow connections are closed as soon as they are returned.
    kwargs.setdefault("pool_size", 40)
    kwargs.setdefault("max_overflow", 0)
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def _create_sqlite_engine(url: str, **kwargs: Any) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy's "begin" event below (pysqlite's own is unreliable).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(SQLITE_IMMEDIATE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    # Objects stay readable after commit: routes serialise them after the transaction has ended.
    return sessionmaker(bind=engine, expire_on_commit=False, autoflush=False)


def begin_write(session: Session) -> None:
    """Start the session's transaction as a writer (BEGIN IMMEDIATE on SQLite; no-op elsewhere)."""
    session.connection(execution_options={SQLITE_IMMEDIATE: True})


@contextmanager
def transaction(factory: sessionmaker[Session], *, write: bool = True) -> Iterator[Session]:
    """A job's unit of work: commit on success, roll back on error."""
    session = factory()
    try:
        if write:
            begin_write(session)
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def upsert(session: Session, model: Any) -> Any:
    """An INSERT (of a mapped class) with ON CONFLICT for the session's dialect; both share the API."""
    if session.get_bind().dialect.name == "postgresql":
        return postgresql.insert(model)
    return sqlite.insert(model)


def skip_locked(session: Session) -> dict[str, Any]:
    """Arguments for `with_for_update()` that let workers share a queue; SQLite has one writer anyway."""
    if session.get_bind().dialect.name == "postgresql":
        return {"skip_locked": True}
    return {}


def _end(session: Session, commit: bool) -> None:
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    finally:
        session.close()


async def get_session(request: Request) -> AsyncIterator[Session]:
    """The request's unit of work: commits when the route returns, rolls back when it raises.

    Writes open as writers (BEGIN IMMEDIATE on SQLite) so concurrent writers queue instead of failing.
    An async dependency, so a read costs no worker thread to open (making a session does no I/O); the
    blocking parts (BEGIN IMMEDIATE, commit, rollback) run in the thread pool, and the end is shielded
    from cancellation so the connection always goes back to the pool.
    """
    factory: sessionmaker[Session] = request.app.state.session_factory
    session = factory()
    try:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            await run_in_threadpool(begin_write, session)
        yield session
    except BaseException:
        with CancelScope(shield=True):
            await run_in_threadpool(_end, session, False)
        raise
    with CancelScope(shield=True):
        await run_in_threadpool(_end, session, True)


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
