"""Failure test: a 20,000-recipient campaign whose `tidings worker` is killed with SIGKILL three times.

A script, not a test (pytest does not collect this folder). Run from the repository root:

    python3 tests/benchmarks/crash.py [--recipients 20000] [--kills 0.2,0.45,0.7] [--lease 5]

What it does:
  1. Drops and recreates the public schema of the database (default `bench_send`), migrates to head, and
     seeds a campaign as send.py does.
  2. Starts the SMTP sink and one `tidings worker` with a short lease (TIDINGS_SEND_LEASE_SECONDS=5),
     so the rows a killed worker held go back to the queue soon after it dies.
  3. Watches the `sent` rows of the deliverables table; at 20%, 45% and 70% of them it kill -9s the
     worker (no QUIT, no clean-up: whatever it had claimed stays `sending` under its lease), notes how
     many rows were `sending` at that moment, and starts a new worker at once.
  4. Waits until no row is queued or sending, then counts what the sink received per recipient.
  5. Prints one JSON line on stdout: recipients missed (must be zero), duplicate messages per kill, and
     their bound. A duplicate is an email the sink accepted whose `sent` was never recorded because the
     worker died first. A worker records outcomes in groups (app/mail/sending/recorder.py: GROUP_SIZE
     outcomes or FLUSH_INTERVAL, whichever comes first, one writer per process), and an email takes a
     place right before its first byte goes to the relay that is free again only once its outcome is
     written: at most UNRECORDED_LIMIT (50) emails are on the wire or accepted and unrecorded at any
     moment, whatever the lanes, the rate and how slowly the database answers. That is the bound
     printed; the old one (before outcomes were recorded promptly, a whole batch per lane) is printed
     beside it.

The sink is smtp-sink with its dump read through a FIFO (send_rig.py): its `X-Rcpt-Args` lines give
per-recipient counts of what the server acknowledged (after the final "."), which is the question a
crash test asks; an email cut off mid-DATA by the kill is not counted, as a real server would not
deliver it either. A custom aiosmtpd sink was not needed: smtp-sink reports per-recipient through
its dump, and it is faster than the worker by far, so it never becomes the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from send_rig import (
    DEFAULT_DATABASE_URL,
    Sink,
    Worker,
    exactly_once,
    prepare_database,
    queue_state,
    say,
    scratch_dir,
    seed_campaign,
    sent_count,
    worker_env,
)
from sqlalchemy import text

from app.config import Settings
from app.db import create_db_engine
from app.mail.sending.recorder import FLUSH_INTERVAL, GROUP_SIZE, UNRECORDED_LIMIT

TARGET_DUPLICATES_PER_KILL = 50


def interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL))
    parser.add_argument("--recipients", type=int, default=20_000)
    parser.add_argument("--kills", default="0.2,0.45,0.7", help="progress fractions at which to kill -9")
    parser.add_argument("--lease", type=int, default=5, help="TIDINGS_SEND_LEASE_SECONDS of the workers")
    parser.add_argument("--timeout", type=float, default=900)
    return parser.parse_args(argv)


def in_flight(engine: Any, campaign_id: int, claimed_since: datetime, lease: int) -> set[str]:
    """Addresses of the rows left `sending` by the worker started at `claimed_since`: their lease ends
    after its start plus a lease (rows an earlier, killed worker left, not yet swept, end before)."""
    with engine.connect() as conn:
        return {
            email.lower()
            for (email,) in conn.execute(
                text(
                    "SELECT c.email FROM deliverables d JOIN contacts c ON c.id = d.contact_id"
                    " WHERE d.campaign_id = :c AND d.state = 'sending' AND d.lease_until >= :since"
                ),
                {"c": campaign_id, "since": naive_utc(claimed_since + timedelta(seconds=lease))},
            )
        }


def naive_utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)
    kill_points = sorted(float(x) for x in args.kills.split(",") if x.strip())
    n = args.recipients
    prepare_database(args.database_url)
    seeded = seed_campaign(args.database_url, n)
    engine = create_db_engine(args.database_url, pool_size=2)
    settings = Settings()

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(scratch_dir()))
        sink = Sink(scratch)
        sink.start()
        stack.callback(sink.stop)
        env = worker_env(args.database_url, sink, scratch, {"TIDINGS_SEND_LEASE_SECONDS": str(args.lease)})
        batch_size = int(env.get("TIDINGS_SEND_BATCH_SIZE", settings.send_batch_size))
        lanes = int(env.get("TIDINGS_SEND_LANES", settings.send_lanes))
        per_worker = batch_size * lanes
        concurrency = int(env.get("TIDINGS_SEND_CONCURRENCY", settings.send_concurrency))

        started = time.monotonic()
        generation = 0
        worker_started = datetime.now(UTC)
        generation_started, generation_sent = time.monotonic(), 0
        worker = Worker.start(env, scratch, f"worker{generation}")
        say(f"started worker {worker.pid}")
        kills: list[dict[str, Any]] = []
        held_by_kill: list[set[str]] = []
        pending = list(kill_points)
        while True:
            time.sleep(0.05)
            if worker.process.poll() is not None:
                raise RuntimeError(f"worker {worker.pid} exited by itself:\n{worker.tail()}")
            sent = sent_count(engine, seeded.campaign_id)
            if pending and sent >= pending[0] * n:
                point = pending.pop(0)
                worker.kill()
                killed_at = time.monotonic()
                held = in_flight(engine, seeded.campaign_id, worker_started, args.lease)
                sending = len(held)
                held_by_kill.append(held)
                rate = (sent - generation_sent) / max(killed_at - generation_started, 1e-3)
                kills.append(
                    {
                        "at_progress": point,
                        "sent_rows": sent,
                        "sink_count": sink.messages,
                        "sending_rows": sending,
                        "seconds": round(killed_at - started, 2),
                        "rate_per_s": round(rate),
                        "bound": UNRECORDED_LIMIT,
                    }
                )
                say(f"kill -9 worker {worker.pid} at {sent:,}/{n:,} sent; it left {sending} rows sending")
                generation += 1
                worker_started = datetime.now(UTC)
                generation_started, generation_sent = time.monotonic(), sent
                worker = Worker.start(env, scratch, f"worker{generation}")
                stack.callback(worker.stop)
                say(f"restarted as worker {worker.pid}")
                continue
            if not pending:
                state = queue_state(engine, seeded.campaign_id)
                if state.fanned_out and state.remaining == 0:
                    break
            if time.monotonic() - started > args.timeout:
                raise RuntimeError(f"not done after {args.timeout:.0f}s: {sent:,}/{n:,} sent")
        done_at = time.monotonic()
        time.sleep(0.5)
        worker.stop()
        state = queue_state(engine, seeded.campaign_id, detail=True)
        counts = sink.stop()

    engine.dispose()
    check = exactly_once(counts, seeded)
    bound = sum(kill["bound"] for kill in kills)
    for kill, held in zip(kills, held_by_kill, strict=True):
        # The duplicates this kill caused: emails it held in flight that the sink got more than once.
        kill["duplicates"] = sum(counts[address] - 1 for address in held if counts[address] > 1)
    worst = max((kill["duplicates"] for kill in kills), default=0)
    within_derived = all(kill["duplicates"] <= kill["bound"] for kill in kills)
    sending_at_kills = sum(k["sending_rows"] for k in kills)
    report = {
        "recipients": n,
        "kills": len(kills),
        "missed_recipients": check["missed_recipients"],
        "duplicate_messages": check["duplicate_messages"],
        "duplicates_bound": bound,
        "duplicates_per_kill": [kill["duplicates"] for kill in kills],
        "duplicates_per_kill_bound": [kill["bound"] for kill in kills],
        "each_kill_within_bound": within_derived,
        "each_kill_within_target": worst <= TARGET_DUPLICATES_PER_KILL,
        "target_per_kill": TARGET_DUPLICATES_PER_KILL,
        "old_bound_per_kill_batch_x_lanes": per_worker,
        "rows_sending_at_kills": sending_at_kills,
        "no_recipient_missed": check["missed_recipients"] == 0,
        "duplicates_within_bound": int(check["duplicate_messages"]) <= bound,
        "duplicates_within_rows_in_flight": int(check["duplicate_messages"]) <= sending_at_kills,
        "seconds": round(done_at - started, 2),
        "kill_log": kills,
        "delivery": check,
        "deliverables": state.states,
        "settings": {
            "send_batch_size": batch_size,
            "send_lanes": lanes,
            "send_concurrency": concurrency,
            "record_group_size": GROUP_SIZE,
            "unrecorded_limit": UNRECORDED_LIMIT,
            "record_flush_interval_s": FLUSH_INTERVAL,
            "lease_seconds": args.lease,
            "cpus": os.cpu_count(),
        },
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        say("interrupted")
        sys.exit(130)
