"""Recording benchmark: the CPU the send worker spends writing outcomes, a group at a time, as the
recorder does (app/mail/sending/recorder.py), without SMTP or the rest of the send path.

A script, not a test. Run from the repository root:

    python3 tests/benchmarks/record.py [--emails 6400] [--group 16] [--database-url URL]

It recreates the database's schema, seeds a campaign as send.py does, fans it out and claims every
row through SendWorker (so each row is `sending` under a lease), then records them all as sent with
`SendWorker.record`, `--group` outcomes a call, and prints one JSON line: CPU of this process (the
recording thread is the caller here) and wall time, per email and per group. Compare commits with
compare.py only where both have this script; otherwise run it in each checkout in turn.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from send_rig import SECRET_KEY, prepare_database, seed_campaign

from app.config import Settings
from app.db import create_db_engine, make_write_session_factory
from app.mail.sending.queue import Claimed, Outcome, SendResult
from app.mail.sending.recorder import GROUP_SIZE
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import MaildirTransport
from app.mail.sending.worker import SendConfig, SendWorker

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_record"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL))
    parser.add_argument("--emails", type=int, default=6400)
    parser.add_argument("--group", type=int, default=GROUP_SIZE, help="outcomes a write (the recorder's)")
    args = parser.parse_args(argv)
    prepare_database(args.database_url)
    seed_campaign(args.database_url, args.emails)
    engine = create_db_engine(args.database_url)
    settings = Settings(database_url=args.database_url, secret_key=SECRET_KEY)
    worker = SendWorker(
        SendConfig.from_settings(settings),
        make_write_session_factory(engine),
        MaildirTransport(Path(os.devnull)),  # never sends: only claim and record run
        MailTokens(SECRET_KEY),
    )
    worker.fan_out()
    claimed: list[Claimed] = []
    while batch := worker.claim():
        claimed += batch
    outcomes = [
        Outcome(
            c.deliverable_id,
            c.campaign_id,
            c.contact_id,
            c.attempts,
            SendResult.SENT,
            message_id=f"<{c.deliverable_id}@bench.example>",
            lease_until=c.lease_until,
        )
        for c in claimed
    ]
    groups = [outcomes[i : i + args.group] for i in range(0, len(outcomes), args.group)]
    load = os.getloadavg()[0]
    cpu, wall = time.process_time(), time.perf_counter()
    for group in groups:
        worker.record(group)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    worker.close()
    engine.dispose()
    report = {
        "emails": len(outcomes),
        "group": args.group,
        "cpu_us_per_email": round(cpu / len(outcomes) * 1e6, 1),
        "cpu_us_per_group": round(cpu / len(groups) * 1e6, 1),
        "wall_us_per_group": round(wall / len(groups) * 1e6, 1),
        "load_average_1m_at_start_and_end": [round(load, 2), round(os.getloadavg()[0], 2)],
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
