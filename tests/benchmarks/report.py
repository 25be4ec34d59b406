"""Report benchmark: GET /campaigns/{id}/report of a campaign of 100,000 deliverables.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing.
Run from the repository root:

    python3 tests/benchmarks/report.py [--deliverables 100000] [--requests 100] [--database-url URL]

What it does:
  1. Drops and recreates the public schema of the database (default `bench_report`), migrates to head,
     and seeds a list of N contacts and a campaign to it (suppression.py's seed), fanned out: N queued
     deliverables.
  2. Makes them look like a campaign a week after its start (set-based SQL): every email sent within
     an hour of the start, 1% failed, 30% opened and 8% clicked over the first three days and a few
     after, 0.3% unsubscribed, 0.5% bounced, 0.05% complaints; each clicking email clicked one of
     five links, a third of them twice (the clicks per link); then VACUUM ANALYZE.
  3. Asks the route `--requests` times through the app in this process (FastAPI's test client, the
     account's bearer token, a PostgreSQL pool: routing, the token lookup, the queries and the JSON)
     and prints one JSON line: the median, p95 and maximum in milliseconds.

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
from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import select, text  # noqa: E402
from suppression import analyze, seed  # noqa: E402

from app.config import Settings  # noqa: E402
from app.db import create_db_engine, make_session_factory, transaction  # noqa: E402
from app.identity.tokens import create_personal_token  # noqa: E402
from app.kit.time import utcnow  # noqa: E402
from app.mail.sending.queue import fan_out_due  # noqa: E402
from app.main import create_app  # noqa: E402
from app.models import User  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_report"

# Moments as a fraction of the rows (by id) and how far after the start, in seconds.
AGE = """
UPDATE deliverables SET
  state = CASE WHEN id % 100 = 0 THEN 'failed' ELSE 'sent' END,
  sent_at = CASE WHEN id % 100 = 0 THEN NULL ELSE :start + (id % 3600) * interval '1 second' END,
  updated_at = :start + (id % 3600) * interval '1 second',
  opened_at = CASE WHEN id % 10 < 3 AND id % 100 <> 0
    THEN :start + ((id * 7919) % 259200) * interval '1 second' + (id % 97 = 0)::int * interval '4 days' END,
  clicked_at = CASE WHEN id % 100 < 8 AND id % 100 <> 0
    THEN :start + ((id * 7919) % 259200) * interval '1 second' + interval '5 minutes' END,
  unsubscribed_at = CASE WHEN id % 1000 < 3 THEN :start + ((id * 31) % 172800) * interval '1 second' END,
  bounced_at = CASE WHEN id % 200 = 1 THEN :start + (id % 7200) * interval '1 second' END,
  spam_at = CASE WHEN id % 2000 = 7 THEN :start + ((id * 13) % 86400) * interval '1 second' END
WHERE campaign_id = :campaign
"""

# Every click, with the link it went to: one of five per email, a third of the clickers twice.
CLICKS = """
INSERT INTO link_clicks (campaign_id, deliverable_id, url, clicked_at)
SELECT campaign_id, id, 'https://example.com/article/' || (id % 5), clicked_at
FROM deliverables, generate_series(1, 2) AS click(n)
WHERE campaign_id = :campaign AND clicked_at IS NOT NULL AND (click.n = 1 OR id % 3 = 0)
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--deliverables", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    args = parser.parse_args()

    prepare_database(args.database_url)
    engine = create_db_engine(args.database_url)
    account_id, campaign_id = seed(engine, args.deliverables)
    factory = make_session_factory(engine)
    with transaction(factory) as session:
        queued = sum(fan_out_due(session, utcnow()).values())
        user = session.scalars(select(User).where(User.account_id == account_id)).one()
        _, token = create_personal_token(session, user, "bench")
    start = utcnow().replace(tzinfo=None)
    with engine.begin() as conn:
        conn.execute(text(AGE), {"start": start, "campaign": campaign_id})
        conn.execute(text(CLICKS), {"campaign": campaign_id})
    analyze(engine)
    engine.dispose()
    say(f"{queued:,} deliverables aged")

    settings = Settings(database_url=args.database_url, mail_rate_limit="1000000/minute", redis_url="")
    timings: list[float] = []
    with TestClient(create_app(settings=settings)) as client:
        headers = {"Authorization": f"Bearer {token}"}
        answer = client.get(f"/campaigns/{campaign_id}/report", headers=headers)
        answer.raise_for_status()
        body = answer.json()
        for _ in range(args.requests):
            started = time.perf_counter()
            client.get(f"/campaigns/{campaign_id}/report", headers=headers).raise_for_status()
            timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    report = {
        "deliverables": queued,
        "requests": args.requests,
        "ms_median": round(statistics.median(timings), 1),
        "ms_p95": round(timings[int(len(timings) * 0.95) - 1], 1),
        "ms_max": round(timings[-1], 1),
        "days_listed": len(body["daily"]),
        "links_listed": len(body["links"]),
        "delivery": body["delivery"],
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
