"""Engine, session factories, `transaction()` for jobs, and the places where SQLite and PostgreSQL differ.
The request's session is in `app.request_sessions`."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
