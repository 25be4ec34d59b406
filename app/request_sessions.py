"""The request's session: `SessionDep`, `ReadSessionDep` and `WriteSessionDep` (one class,
`RequestSession`, ends every request's session), and `side_transaction()` for a write beside the
request's. Apart from `app.db` so that what runs no request (`tidings worker`, the jobs) does not import
FastAPI with the engines and factories."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Annotated, Protocol, cast

from anyio import CancelScope
from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import HTTPConnection

from app.db import begin_write


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
