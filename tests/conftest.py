"""Test fixtures: a migrated real database (SQLite by default, PostgreSQL when
TIDINGS_TEST_DATABASE_URL says so), one rolled-back transaction per test, and the app on top of it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session, sessionmaker

from tests.smtp_sink import smtp_sink  # noqa: F401 (a fixture every test folder may use)

# The app is imported by the fixtures that need it, not here: a test of a service or of kit/ runs
# without `import app.main` (about 2.5 s) and the test client; docs/architecture.md ("The inner loop").
if TYPE_CHECKING:
    from fastapi.testclient import TestClient
    from time_machine import TimeMachineFixture

    from app.config import Settings

# Loopback servers as fixtures: the upstream (`upstream`) of the feed and outbound-HTTP tests, and the
# fake OpenAI-compatible engine (`llm`) of the watch tests and the scale-out test; and a headless
# Chromium (`browser`) for the browser tests.
pytest_plugins = ("tests.upstream", "tests.fake_engine", "tests.browser")


# The `process` marker: a test that starts a process (`tidings serve`/`worker`, the CLI, Node, Dovecot,
# Chromium) or an outside server on loopback (the SMTP sink, the upstream HTTP server). The inner loop
# leaves them out (`pytest -m "not process"`, docs/architecture.md); CI runs everything. A test is
# marked by the fixtures it takes, or by its module when the module starts processes itself.
PROCESS_FIXTURES = {"smtp_sink", "upstream", "browser", "tidings", "sent", "sender", "llm"}
PROCESS_MODULES = (
    "subprocess",
    "tests.processes",
    "tests.shipped",
    "tests.magpie_driver",
    "tests.tcp_relay",
    "tests.mail.bounces.dovecot",
    "tests.authroutes.live",
)


def _starts_processes(module: Any) -> bool:
    names = vars(module).values()
    return any(
        getattr(value, "__name__", "") in PROCESS_MODULES
        or getattr(value, "__module__", "") in PROCESS_MODULES
        for value in names
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    by_module: dict[str, bool] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and module.__name__ not in by_module:
            by_module[module.__name__] = _starts_processes(module)
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & PROCESS_FIXTURES or (module is not None and by_module[module.__name__]):
            item.add_marker(pytest.mark.process)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Hypothesis' plugin imports hypothesis (about 1 s) in every run's summary, used or not. When no
    # collected module imported it, the plugin has nothing to report: it goes.
    if "hypothesis" not in sys.modules:
        plugin = session.config.pluginmanager.get_plugin("hypothesispytest")
        if plugin is not None:
            session.config.pluginmanager.unregister(plugin)


# Tests that reason about days, windows or expiry own the clock (time-machine), never the wall clock's
# hour: they start at NOON, a weekday midday far from any day, month or year boundary, unless they move
# the clock to the boundary they are about.
NOON = datetime(2027, 6, 9, 12, 0, tzinfo=UTC)


@pytest.fixture
def clock(time_machine: TimeMachineFixture) -> TimeMachineFixture:
    """The clock at NOON and ticking on from there; `clock.move_to(moment)` and `clock.shift(delta)`
    move it. Ask for it before other fixtures (or with `pytest.mark.usefixtures("clock")`) so that
    the rows they make are made at NOON too."""
    time_machine.move_to(NOON)
    return time_machine


def _database_url(tmp_dir: Path) -> str:
    return os.environ.get("TIDINGS_TEST_DATABASE_URL") or f"sqlite:///{tmp_dir / 'test.db'}"


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    from app.db import create_db_engine, is_sqlite_url
    from app.migrate import upgrade_to_head

    url = _database_url(tmp_path_factory.mktemp("db"))
    if not is_sqlite_url(url):
        # Start from an empty schema so the migrations themselves are what is tested.
        engine = create_db_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        engine.dispose()
    upgrade_to_head(url)
    return url


@pytest.fixture(scope="session")
def engine(database_url: str) -> Iterator[Engine]:
    from app.db import create_db_engine

    engine = create_db_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def connection(engine: Engine) -> Iterator[Connection]:
    """One outer transaction per test, rolled back at the end: nothing a test writes survives it."""
    conn = engine.connect()
    outer = conn.begin()
    yield conn
    outer.rollback()
    conn.close()


@pytest.fixture
def session_factory(connection: Connection) -> sessionmaker[Session]:
    # Commits inside the app release a savepoint instead of ending the outer transaction.
    return sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False, autoflush=False
    )


@pytest.fixture
def db(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session for arranging and inspecting rows directly."""
    session = session_factory()
    yield session
    session.close()


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    from app.config import Settings

    return Settings(
        database_url=database_url,
        secret_key="test-secret-key-that-is-long-enough-for-tests",
        var_dir=tmp_path / "var",
        mail_rate_limit="1000/minute",
        redis_url="",
    )


async def no_dns(name: str) -> list[str]:
    """The tests' resolver: DNS never answers (no lookup leaves the machine); a test that wants
    answers puts a fake of its own in `app.state.txt_resolver`."""
    from app.mail.dns_records import DnsUnreachable

    raise DnsUnreachable("the tests do not look DNS up")


@pytest.fixture
def app(settings: Settings, session_factory: sessionmaker[Session]) -> Any:
    from app.main import create_app

    app = create_app(settings=settings, session_factory=session_factory)
    app.state.txt_resolver = no_dns
    return app


@pytest.fixture
def client(app: Any) -> Iterator[TestClient]:
    from fastapi.testclient import TestClient

    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@dataclass
class ApiUser:
    user_id: int
    account_id: int
    email: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture
def make_user(session_factory: sessionmaker[Session]) -> Any:
    """make_user(email=..., plan=..., contact_limit=..., timezone=..., warmup_days=...) -> ApiUser."""
    from app.identity.accounts import create_user
    from app.identity.tokens import create_personal_token

    counter = iter(range(1, 10_000))

    def make(email: str | None = None, **options: Any) -> ApiUser:
        email = email or f"user{next(counter)}@example.com"
        with session_factory() as session:
            user = create_user(session, email=email, name=options.pop("name", "Test User"), **options)
            _, token = create_personal_token(session, user, "test")
            session.commit()
            return ApiUser(user_id=user.id, account_id=user.account_id, email=email, token=token)

    return make


@pytest.fixture
def api_user(make_user: Any) -> ApiUser:
    """An empire-plan user with a token: the usual caller of the email API."""
    return make_user()  # type: ignore[no-any-return]
