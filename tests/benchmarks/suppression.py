"""Suppression benchmark: the fan-out of one campaign to 100,000 contacts, without and with 10,000 of
them on the account's suppression list.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing.
Run from the repository root:

    python3 tests/benchmarks/suppression.py [--contacts 100000] [--suppressed 10000] [--runs 5]
        [--database-url URL]

What it does:
  1. Drops and recreates the public schema of the database (default `bench_suppression`), migrates to
     head.
  2. Seeds a user and a list of N contacts (set-based SQL), then VACUUM ANALYZE.
  3. Times `fan_out_due` (the one INSERT ... SELECT of a campaign's deliverables, with its NOT EXISTS
     on the suppression list) for a campaign to the list, `--runs` times, each in a transaction rolled
     back afterwards so that every run starts from the same tables.
  4. Puts every tenth contact's address (S of them) on the suppression list, ANALYZE, and times the
     same fan-out again.
  5. Prints one JSON line on stdout (the median of each, their ratio, and the rows queued per second);
     progress goes to stderr.

Needs a PostgreSQL server (default 127.0.0.1:5432, user postgres, trust auth).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from api import prepare_database, say  # noqa: E402
from sqlalchemy import Engine, text  # noqa: E402

from app.db import create_db_engine, make_session_factory, transaction  # noqa: E402
from app.identity.accounts import create_user  # noqa: E402
from app.kit.time import utcnow  # noqa: E402
from app.mail.sending.queue import fan_out_due  # noqa: E402
from app.models import Campaign, CampaignList, ContactList  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_suppression"


def seed(engine: Engine, contacts: int) -> tuple[int, int]:
    """A user and a list of `contacts` contacts; returns (account id, campaign id)."""
    factory = make_session_factory(engine)
    with transaction(factory) as session:
        user = create_user(session, email="sender@bench.example", name="Sender", contact_limit=contacts + 10)
        readers = ContactList(account_id=user.account_id, user_id=user.id, name="Readers")
        session.add(readers)
        session.flush()
        account_id, list_id = user.account_id, readers.id
        campaign = Campaign(
            account_id=account_id,
            title="Weekly",
            subject="Weekly",
            html="<p>Hello</p>",
            from_name="The Weekly Tidings",
            from_email="news@tidings.example",
            scheduled_at=utcnow(),
        )
        session.add(campaign)
        session.flush()
        session.add(CampaignList(campaign_id=campaign.id, list_id=list_id))
        campaign_id = campaign.id
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO contacts (account_id, email, email_key, created_at, updated_at)"
                " SELECT :a, 'r' || g || '@bench.example', 'r' || g || '@bench.example',"
                " now() at time zone 'utc', now() at time zone 'utc' FROM generate_series(1, :n) AS g"
            ),
            {"a": account_id, "n": contacts},
        )
        conn.execute(
            text(
                "INSERT INTO list_memberships (list_id, contact_id, created_at)"
                " SELECT :l, id, now() at time zone 'utc' FROM contacts WHERE account_id = :a"
            ),
            {"l": list_id, "a": account_id},
        )
    analyze(engine)
    return account_id, campaign_id


def analyze(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))


def suppress(engine: Engine, account_id: int, every: int) -> int:
    """Every `every`-th contact's address on the list; how many."""
    with engine.begin() as conn:
        count = conn.execute(
            text(
                "INSERT INTO suppressions (account_id, email, email_key, reason, created_at)"
                " SELECT account_id, email, email_key, 'api', now() at time zone 'utc' FROM contacts"
                " WHERE account_id = :a AND id % :every = 0"
            ),
            {"a": account_id, "every": every},
        ).rowcount
    analyze(engine)
    return int(count)


def time_fan_out(engine: Engine, runs: int) -> tuple[float, int]:
    """Median seconds of a fan-out and the rows it queued; each run is rolled back."""
    factory = make_session_factory(engine)
    seconds: list[float] = []
    queued = 0
    for _ in range(runs):
        with factory() as session:
            started = time.perf_counter()
            queued = sum(fan_out_due(session, utcnow()).values())
            session.flush()
            seconds.append(time.perf_counter() - started)
            session.rollback()
    return statistics.median(seconds), queued


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--contacts", type=int, default=100_000)
    parser.add_argument("--suppressed", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    args = parser.parse_args()

    prepare_database(args.database_url)
    engine = create_db_engine(args.database_url)
    try:
        say(f"seeding {args.contacts} contacts")
        account_id, _ = seed(engine, args.contacts)
        time_fan_out(engine, 1)  # warm the caches and the statement cache
        say("fan-out without suppressions")
        without, queued_without = time_fan_out(engine, args.runs)
        suppressed = suppress(engine, account_id, max(1, args.contacts // max(1, args.suppressed)))
        say(f"fan-out with {suppressed} suppressed")
        time_fan_out(engine, 1)
        with_list, queued_with = time_fan_out(engine, args.runs)
    finally:
        engine.dispose()
    print(
        json.dumps(
            {
                "contacts": args.contacts,
                "suppressed": suppressed,
                "runs": args.runs,
                "fan_out_seconds_without_suppressions": round(without, 3),
                "fan_out_seconds_with_suppressions": round(with_list, 3),
                "ratio_with_to_without": round(with_list / without, 3),
                "queued_without": queued_without,
                "queued_with": queued_with,
                "rows_examined_per_second_without": round(args.contacts / without),
                "rows_examined_per_second_with": round(args.contacts / with_list),
            }
        )
    )


if __name__ == "__main__":
    main()
