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
     search by name, the CSV export of a search, and the campaign report page.
  3. Prints one JSON line (p50 and p95 in ms of each, and the machine's one-minute load average before
     and after the timed requests: figures on a shared machine mean little without it) on stdout;
     progress goes to stderr.

The campaign report is of a campaign sent to every contact (its deliverables inserted in SQL: sent over
the first 30 hours, a third opened, one in twenty clicked, a few bounced or unsubscribed). Needs a
PostgreSQL server (default 127.0.0.1:5432, user postgres, trust auth).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import httpx  # noqa: E402
from api import free_port, prepare_database, say, seed, server  # noqa: E402
from sqlalchemy import select, text  # noqa: E402

from app.db import create_db_engine, make_session_factory, transaction  # noqa: E402
from app.identity.accounts import set_user_password  # noqa: E402
from app.kit.time import utcnow  # noqa: E402
from app.models import Campaign, User  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_console"
PASSWORD = "bench console password"
PAGES = {
    "contacts_list": "/console/contacts",
    "contacts_page_500": "/console/contacts?page=500",
    "contacts_search": "/console/contacts?q=last4242",
    "contacts_export_search": "/console/contacts/export.csv?q=last4242",
    "campaign_report": "/console/campaigns/{campaign_id}/report",
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


def sent_campaign(url: str) -> int:
    """A campaign sent to every contact of the reader's account, with its outcomes; its id."""
    engine = create_db_engine(url)
    try:
        with transaction(make_session_factory(engine)) as session:
            user = session.scalars(select(User).where(User.email == "reader@bench.example")).one()
            start = utcnow() - timedelta(hours=60)
            campaign = Campaign(
                account_id=user.account_id,
                title="Bench",
                subject="Bench",
                html="<p>Bench</p>",
                from_name="Bench",
                from_email="bench@bench.example",
                scheduled_at=start,
                sent_at=start,
            )
            session.add(campaign)
            session.flush()
            campaign_id, account_id = campaign.id, user.account_id
        started = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO deliverables (account_id, campaign_id, contact_id, state, send_after,"
                    " attempts, sent_at, opened_at, clicked_at, bounced_at, unsubscribed_at,"
                    " created_at, updated_at)"
                    " SELECT c.account_id, :campaign_id, c.id, 'sent', :start, 1, sent,"
                    " CASE WHEN c.id % 3 = 0 THEN sent + (c.id % 97) * interval '1 hour' END,"
                    " CASE WHEN c.id % 20 = 0 THEN sent + (c.id % 71) * interval '1 hour' END,"
                    " CASE WHEN c.id % 500 = 1 THEN sent END,"
                    " CASE WHEN c.id % 300 = 2 THEN sent + interval '2 hours' END,"
                    " :start, :start"
                    " FROM (SELECT id, account_id,"
                    " CAST(:start AS timestamp) + (id % 30) * interval '1 hour' AS sent"
                    " FROM contacts WHERE account_id = :account_id) AS c"
                ),
                {
                    "campaign_id": campaign_id,
                    "start": start.replace(tzinfo=None),
                    "account_id": account_id,
                },
            )
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))
        say(f"sent the campaign to every contact in {time.perf_counter() - started:.1f}s")
    finally:
        engine.dispose()
    return campaign_id


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
    campaign_id = sent_campaign(args.database_url)
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
            load_before = os.getloadavg()[0]
            for name, pattern in PAGES.items():
                path = pattern.format(campaign_id=campaign_id)
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
            load_after = os.getloadavg()[0]
    load = {"load_before": round(load_before, 2), "load_after": round(load_after, 2)}
    print(json.dumps({"contacts": args.contacts, "requests": args.requests, **load, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
