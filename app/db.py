"""Engine, session factories, the request's session (`SessionDep`, `ReadSessionDep`, `WriteSessionDep`),
`side_transaction()` for a write beside the request's, `transaction()` for jobs, and the places where SQLite
and PostgreSQL differ."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol, cast

from anyio import CancelScope
from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from psycopg import Connection as PsycopgConnection
from psycopg import OperationalError as PsycopgOperationalError
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from sqlalchemy import ColumnElement, Connection, Engine, any_, bindparam, create_engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import psycopg
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolSlotTimeout
from sqlalchemy.orm import InstrumentedAttribute, Session, sessionmaker
from sqlalchemy.types import TypeEngine
from starlette.requests import HTTPConnection

# Execution option a session sets to open its SQLite transaction with BEGIN IMMEDIATE. A write that
# starts as a read under a deferred BEGIN fails with SQLITE_BUSY_SNAPSHOT when another writer committed
# in between, without waiting for the busy timeout; taking the write lock up front makes writers queue.
SQLITE_IMMEDIATE = "tidings_sqlite_immediate"
# How long a request (or job) waits for a connection, a free pool slot or a new connection, before the
# database counts as unreachable: long enough for a busy pool to turn over, short enough that a lost
# database is a 503 within seconds rather than a hung request.
DATABASE_WAIT_SECONDS = 2
# Clients are told to come back after this many seconds (Retry-After) while it is unreachable.
RETRY_AFTER_SECONDS = 5
# At most one log line about it this often, however many requests and jobs fail meanwhile.
OUTAGE_LOG_EVERY_SECONDS = 5.0
# What losing the database raises: no connection, a broken one, or no pool slot in time (on SQLite, a
# lock held past the busy timeout reads the same: come back later).
UNREACHABLE = (OperationalError, InterfaceError, PoolSlotTimeout, PsycopgOperationalError, PoolTimeout)

outage_log = logging.getLogger("tidings.database")
_last_outage_line = [0.0]


def note_unreachable(exc: BaseException) -> None:
    """One warning line about the unreachable database, at most every OUTAGE_LOG_EVERY_SECONDS (every
    failing request and job calls this: a traceback each would bury the log)."""
    now = time.monotonic()
    if now - _last_outage_line[0] < OUTAGE_LOG_EVERY_SECONDS:
        return
    _last_outage_line[0] = now
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    outage_log.warning("the database is unreachable: %s: %s", type(exc).__name__, first_line)


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
    kwargs.setdefault("pool_timeout", DATABASE_WAIT_SECONDS)
    if "connect_timeout" not in make_url(url).query:  # the operator's own, in the URL, wins
        kwargs.setdefault("connect_args", {"connect_timeout": DATABASE_WAIT_SECONDS})
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


def make_write_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions whose transaction, when it starts (lazily, at the first statement), is a writer's."""
    return make_session_factory(engine.execution_options(**{SQLITE_IMMEDIATE: True}))


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


def ping(session: Session) -> None:
    """A round trip to the database (GET /healthz); raises SQLAlchemyError when it is unreachable."""
    session.execute(text("SELECT 1"))


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


def among(
    session: Session,
    column: ColumnElement[Any] | InstrumentedAttribute[Any],
    values: Sequence[Any],
    element_type: TypeEngine[Any],
) -> ColumnElement[bool]:
    """`column IN (values)`; on PostgreSQL `= ANY` of one array parameter instead of a parameter a
    value, which SQLAlchemy and psycopg would otherwise name, convert and send one by one (and psycopg
    parse afresh for every new count of them)."""
    if session.get_bind().dialect.name == "postgresql":
        return column == any_(bindparam(None, list(values), type_=postgresql.ARRAY(element_type)))
    return column.in_(list(values))


def among_parameter(
    column: ColumnElement[Any] | InstrumentedAttribute[Any],
    name: str,
    element_type: TypeEngine[Any],
    *,
    postgres: bool,
) -> ColumnElement[bool]:
    """`among` for a statement built once: the values are the parameter `name`, given at each execution
    (one array on PostgreSQL, an expanding IN list elsewhere)."""
    if postgres:
        return column == any_(bindparam(name, type_=postgresql.ARRAY(element_type)))
    return column.in_(bindparam(name, expanding=True))


def _end(session: Session, commit: bool) -> None:
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    finally:
        session.close()


class AppDatabases(Protocol):
    """What the request's sessions read of the app's state (`AppState` holds them). This module sits
    below `app.app_state`, which names the domains' classes, so it names only the three values it reads."""

    read_session_factory: sessionmaker[Session]
    write_session_factory: sessionmaker[Session]
    reads_autocommit: bool


def app_databases(connection: HTTPConnection) -> AppDatabases:
    return cast(AppDatabases, connection.app.state)


class RequestSession:
    """A dependency: the request's unit of work, a session that commits when the route returns and
    rolls back when it raises (the one finalizer of every request's session).

    `write=None` takes the method's: a reader's session for GET, HEAD and OPTIONS (autocommit on
    PostgreSQL), a writer's otherwise (BEGIN IMMEDIATE on SQLite at the first statement, so concurrent
    writers queue instead of failing, and authentication's own short write comes before the lock).
    `write=True` or `False` says it whatever the method. An async dependency, so a request costs no
    worker thread for its session: making one does no I/O, a session that never touched the database
    (or only read in autocommit) is closed on the loop, and commit or rollback run in the thread pool,
    shielded from cancellation so the connection always goes back.
    """

    def __init__(self, *, write: bool | None = None) -> None:
        self.write = write

    async def __call__(self, request: Request) -> AsyncIterator[Session]:
        state = app_databases(request)
        reading = request.method in ("GET", "HEAD", "OPTIONS") if self.write is None else not self.write
        factory = state.read_session_factory if reading else state.write_session_factory
        autocommit = reading and state.reads_autocommit
        session = factory()
        try:
            yield session
        except BaseException:
            with CancelScope(shield=True):
                await _finish(session, commit=False, autocommit=autocommit)
            raise
        with CancelScope(shield=True):
            await _finish(session, commit=True, autocommit=autocommit)


async def _finish(session: Session, *, commit: bool, autocommit: bool) -> None:
    if not session.in_transaction() or (
        autocommit and not session.dirty and not session.new and not session.deleted
    ):
        # Nothing to send: closing only returns an idle connection to the pool.
        session.close()
        return
    await run_in_threadpool(_end, session, commit)


get_session = RequestSession()
get_read_session = RequestSession(write=False)
get_write_session = RequestSession(write=True)

# The request's session, a reader's or a writer's by the method: what nearly every route takes.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
# A reader's whatever the method: a POST that only reads and then does slow I/O (the hosted form's
# submission), which must not hold SQLite's write lock meanwhile.
ReadSessionDep = Annotated[Session, Depends(get_read_session, scope="function")]
# A writer's whatever the method: the GET routes that write (the open pixel, the click redirect, the
# hosted form's confirmation link), whose reads would otherwise get an autocommit session on PostgreSQL
# (each UPDATE its own transaction) and a reader's deferred BEGIN on SQLite (which fails instead of
# waiting when another writer commits).
WriteSessionDep = Annotated[Session, Depends(get_write_session, scope="function")]


@contextmanager
def side_transaction(
    connection: HTTPConnection, *, commit_despite: tuple[type[BaseException], ...] = ()
) -> Iterator[Session]:
    """A writer's unit of work beside the request's: its own session of the app, committed when the
    block ends, so what it wrote stands whatever the request does next (it is not rolled back with the
    request's session). A block that raises is rolled back, unless it raised one of `commit_despite`:
    then its writes are committed and the error goes on (a device poll answered with an error still
    records the poll). Synchronous: call it in a worker thread, never on the event loop.

    For the few writes that must stand alone: the session cookie's expiry pushed back while
    authenticating, the device poll. Everything else writes through the request's session.
    """
    session = app_databases(connection).write_session_factory()
    try:
        begin_write(session)
        yield session
    except commit_despite:
        session.commit()
        raise
    except BaseException:
        session.rollback()
        raise
    else:
        session.commit()
    finally:
        session.close()


def make_async_pool(url: str, max_size: int = 16) -> AsyncConnectionPool:
    """PostgreSQL: a pool of autocommit connections of psycopg's async driver, for the hot read paths
    that run on the event loop (authentication, contact listings). Opened and closed by the app."""
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    return AsyncConnectionPool(
        conninfo,
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True, "connect_timeout": DATABASE_WAIT_SECONDS},
        timeout=DATABASE_WAIT_SECONDS,
        open=False,
    )


def psycopg_connection(connection: Connection) -> PsycopgConnection[Any]:
    """The psycopg connection under a SQLAlchemy one, for a PsycopgStatement run on it directly (an
    OperationalError when SQLAlchemy has already let it go)."""
    driver = connection.connection.driver_connection
    if not isinstance(driver, PsycopgConnection):
        raise PsycopgOperationalError("the connection is closed")
    return driver


@dataclass(frozen=True)
class PsycopgStatement:
    """A Core statement compiled once to psycopg SQL text (`%(name)s` parameters), with the values it
    carries itself (a LIMIT, say); `params()` adds the ones given at run time."""

    sql: str
    defaults: dict[str, Any]

    @classmethod
    def of(cls, statement: Any, *, binary: tuple[str, ...] = ()) -> PsycopgStatement:
        """`binary` names the parameters sent in PostgreSQL's binary format (`%(name)b`): an array's
        text form is built element by element in Python (quoting, escaping), its binary form in C. A
        group of 21 sent rows' three arrays took 230 us to dump as text, 58 as binary (in-process,
        2026-11-27), on the thread that records sent emails."""
        dialect = psycopg.dialect()  # type: ignore[no-untyped-call]
        compiled = statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
        sql = str(compiled)
        for name in binary:
            placeholder = f"%({name})s"
            if placeholder not in sql:
                raise ValueError(f"the statement has no parameter {name!r}")
            sql = sql.replace(placeholder, f"%({name})b")
        return cls(sql, dict(compiled.params))

    def params(self, **values: Any) -> dict[str, Any]:
        return {**self.defaults, **values}


@dataclass(frozen=True)
class TwoWayStatement:
    """A statement of a hot path defined once and run two ways: `statement` through a session (SQLite,
    and tests that share one transaction), `psycopg` (the same statement compiled once) on the async
    pool. A parity test runs both over the same committed rows (the token lookup, the open pixel)."""

    statement: Any
    psycopg: PsycopgStatement

    @classmethod
    def of(cls, statement: Any) -> TwoWayStatement:
        return cls(statement, PsycopgStatement.of(statement))
