"""Console benchmark: the Contacts page on an account of 100,000 contacts, on PostgreSQL.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing.
Run from the repository root:

    python3 tests/benchmarks/console.py [--contacts 100000] [--requests 50] [--database-url URL]

What it does:
  1. Drops and recreates the public schema of the database (default `bench_console`), migrates to head,
     and loads the contacts as tests/benchmarks/api.py does; the account's owner gets a username and
     password.
  2. Starts Tidings (one uvicorn worker), signs in through /api/auth with a browser's Origin, and times
     `--requests` sequential GETs of each: the contacts list (page 1), a page deep in it (page 500), a
     search by name, and the CSV export of a search.
  3. Prints one JSON line (p50 and p95 in ms of each) on stdout; progress goes to stderr.

The campaign report page is not built yet (it waits for the campaign controls), so its figure is not
printed. Needs a PostgreSQL server (default 127.0.0.1:5432, user postgres, trust auth).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import httpx  # noqa: E402
from api import free_port, prepare_database, say, seed, server  # noqa: E402
from sqlalchemy import select  # noqa: E402

from app.db import create_db_engine, make_session_factory, transaction  # noqa: E402
from app.identity.accounts import set_user_password  # noqa: E402
from app.models import User  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_console"
PASSWORD = "bench console password"
PAGES = {
    "contacts_list": "/console/contacts",
    "contacts_page_500": "/console/contacts?page=500",
    "contacts_search": "/console/contacts?q=last4242",
    "contacts_export_search": "/console/contacts/export.csv?q=last4242",
}


def give_password(url: str) -> str:
    """The loaded account's owner gets a username and password; returns the username."""
    engine = create_db_engine(url)
    try:
        with transaction(make_session_factory(engine)) as session:
            user = session.scalars(select(User).where(User.email == "reader@bench.example")).one()
            user.username = "reader"
            set_user_password(session, user, PASSWORD)
    finally:
        engine.dispose()
    return "reader"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contacts", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    args = parser.parse_args(argv)

    prepare_database(args.database_url)
    seed(args.database_url, args.contacts)
    username = give_password(args.database_url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="tidings-bench-") as scratch:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TIDINGS_DATABASE_URL": args.database_url,
            "TIDINGS_BASE_URL": base,
            "TIDINGS_REDIS_URL": "",
            "TIDINGS_VAR_DIR": str(Path(scratch) / "var"),
            "TIDINGS_SECRET_KEY": "bench-" + "x" * 48,
        }
        env.pop("TIDINGS_ENV", None)
        with (
            server("tidings", ["app.main:create_app", "--factory"], port, env, "/healthz") as served,
            httpx.Client(base_url=served, headers={"Origin": base}, timeout=30) as client,
        ):
            signed = client.post(
                "/api/auth/sign-in/username", json={"username": username, "password": PASSWORD}
            )
            signed.raise_for_status()
            figures: dict[str, dict[str, float]] = {}
            for name, path in PAGES.items():
                assert client.get(path).status_code == 200, path  # warm up, and check it is the page
                times = []
                for _ in range(args.requests):
                    started = time.perf_counter()
                    client.get(path).raise_for_status()
                    times.append((time.perf_counter() - started) * 1000)
                figures[name] = {
                    "p50_ms": round(statistics.median(times), 1),
                    "p95_ms": round(percentile(times, 0.95), 1),
                }
                say(f"{name}: {figures[name]}")
    print(json.dumps({"contacts": args.contacts, "requests": args.requests, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
