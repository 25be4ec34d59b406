"""Sending benchmark: one campaign to 100,000 recipients through `tidings worker` into Postfix's smtp-sink.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing,
since shared machines are noisy. Run from the repository root:

    python3 tests/benchmarks/send.py [--recipients 100000] [--workers 1] [--database-url URL]
    python3 tests/benchmarks/send.py --recipients 1000000      # memory stays flat as the campaign grows
    python3 tests/benchmarks/send.py --dkim rsa                # the campaign's domain has a DKIM key
    python3 tests/benchmarks/send.py --dkim-compare            # without a key, then with one: the cost
    python3 tests/benchmarks/send.py --pause-at 0.3            # unpaused, then paused at 30% and resumed
    python3 tests/benchmarks/send.py --throttled-domain --recipients 6000   # see throttled.py

What it does:
  1. Drops and recreates the public schema of the database (default `bench_send`), migrates to head.
  2. Seeds a user, a list of N contacts (generate_series) and a campaign of about 5 KB of html with
     seven links and `{{ first_name }}` merge tags, scheduled now.
  3. Starts `smtp-sink` on a free loopback port, dumping into a FIFO that `grep` reduces to one line per
     recipient (see send_rig.py), and times `smtp-source` against it: the reference, the most this
     machine and this sink take, with messages as big as Tidings' and reused connections.
  4. Starts K `tidings worker` processes (TIDINGS_SEND_* from the environment pass through) and times
     the campaign from their start (start-up, migration check and fan-out included) until the sink has
     counted N messages and no row is queued or sending. The resident memory of every worker is read
     from /proc at 10%, 50% and 100% of the sink's count; VmHWM is each one's peak.
  5. Stops the workers and the sink and prints one JSON line on stdout; progress goes to stderr.

With `--dkim rsa` (or `rsa+ed25519`) the campaign's From domain gets its key(s) before the workers start,
as `tidings dkim create` makes them, so every email is signed. `--dkim-compare` runs the whole benchmark
twice in the same session, without a key and then with an RSA key, prints both lines, then a third with
the two rates and the signing cost per email.

With `--pause-at F` the benchmark runs twice in the same session: unpaused, then with the campaign paused
(as `POST /campaigns/{id}/pause` does, through the same service) once the sink has counted F of it,
resumed `--pause-seconds` later. It prints both lines and a third: the time from the pause's commit to
the last email the sink counted, the emails after it, and the send rate before the pause and after the
resume beside the unpaused run's.

Needs Postfix's `smtp-sink` and `smtp-source` (Debian: `apt-get install -y postfix`) and a PostgreSQL
server (default 127.0.0.1:5432, user postgres, trust auth). Everything started is stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parent))

from send_rig import (
    DEFAULT_DATABASE_URL,
    FROM_DOMAIN,
    SECRET_KEY,
    Sink,
    Worker,
    exactly_once,
    prepare_database,
    queue_state,
    rendered_size,
    say,
    scratch_dir,
    seed_campaign,
    worker_env,
)

from app.config import Settings
from app.db import create_db_engine, make_session_factory, transaction
from app.kit.time import utcnow
from app.models import Campaign

TARGET_MESSAGES_PER_S = 2000.0
TARGET_PEAK_RSS_MB = 300.0
# "Flat": the workers' memory at 100% of the campaign within this much of what it was at 10%.
FLAT_TOLERANCE_MB = 25.0
CHECKPOINTS = (0.1, 0.5, 1.0)
DKIM_MODES = ("none", "rsa", "rsa+ed25519")


def interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL))
    parser.add_argument("--recipients", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=1, help="`tidings worker` processes")
    parser.add_argument(
        "--reference-messages", type=int, default=0, help="smtp-source's messages (default: min(N, 100000))"
    )
    parser.add_argument("--reference-sessions", type=int, default=20, help="smtp-source parallel sessions")
    parser.add_argument(
        "--no-dump",
        action="store_true",
        help="the sink only counts (no per-recipient check): the sink's own cost without its dump",
    )
    parser.add_argument(
        "--dkim",
        choices=DKIM_MODES,
        default="none",
        help="DKIM keys of the campaign's From domain: none, an RSA key, or RSA and Ed25519",
    )
    parser.add_argument(
        "--dkim-compare", action="store_true", help="run without a key, then with an RSA key, and compare"
    )
    parser.add_argument(
        "--pause-at", type=float, default=0.0, help="pause at this fraction of the campaign, then resume"
    )
    parser.add_argument(
        "--throttled-domain",
        action="store_true",
        help="an aiosmtpd receiver throttling one domain at 60 a minute (throttled.py), without and with",
    )
    parser.add_argument("--throttled", type=int, default=150, help="recipients at the throttled domain")
    parser.add_argument("--pause-seconds", type=float, default=3.0, help="how long the campaign stays paused")
    parser.add_argument("--timeout", type=float, default=3600, help="give up after this many seconds")
    parser.add_argument("--log-dir", type=Path, help="keep the workers' logs in this folder")
    parser.add_argument(
        "--worker-root",
        type=Path,
        help="run the workers from this copy of the repository (an older commit, to compare;"
        " e.g. `git archive COMMIT app migrations | tar -x -C DIR`); same schema required",
    )
    return parser.parse_args(argv)


def memory(workers: list[Worker]) -> dict[str, float]:
    readings = [w.memory_kb() for w in workers]
    return {
        "rss_mb_each_max": round(max(r for r, _ in readings) / 1024, 1),
        "rss_mb_total": round(sum(r for r, _ in readings) / 1024, 1),
        "hwm_mb_each_max": round(max(h for _, h in readings) / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)
    if args.pause_at:
        return compare_pause(args)
    if args.throttled_domain:
        from throttled import compare as compare_throttled

        print(json.dumps(compare_throttled(args)), flush=True)
        return 0
    if not args.dkim_compare:
        print(json.dumps(run(args)), flush=True)
        return 0
    rates: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for mode in ("none", "rsa"):
        say(f"--- DKIM: {mode}")
        report = run(argparse.Namespace(**{**vars(args), "dkim": mode}))
        print(json.dumps(report), flush=True)
        rates[mode] = report["messages_per_s"]
        cpu[mode] = report["worker_cpu_us_per_message"]
    summary = {
        "dkim_compare": {
            "messages_per_s_without_key": rates["none"],
            "messages_per_s_with_rsa_key": rates["rsa"],
            "ratio": round(rates["rsa"] / rates["none"], 3) if rates["none"] else None,
            "worker_cpu_us_per_message_without_key": cpu["none"],
            "worker_cpu_us_per_message_with_rsa_key": cpu["rsa"],
            "signing_cpu_us_per_message": round(cpu["rsa"] - cpu["none"], 1),
        }
    }
    print(json.dumps(summary), flush=True)
    return 0


def compare_pause(args: argparse.Namespace) -> int:
    """The campaign unpaused, then paused and resumed; both reports and the comparison."""
    say("--- unpaused")
    unpaused = run(argparse.Namespace(**{**vars(args), "pause_at": 0.0}))
    print(json.dumps(unpaused), flush=True)
    say(f"--- paused at {args.pause_at:.0%}")
    paused = run(args)
    print(json.dumps(paused), flush=True)
    pause = paused["pause"]
    summary = {
        "pause_compare": {
            "pause_to_last_email_s": pause["pause_to_last_email_s"],
            "emails_after_pause": pause["emails_after_pause"],
            "messages_per_s_unpaused_send_phase": unpaused["send_phase_messages_per_s"],
            "messages_per_s_before_pause": pause["messages_per_s_before"],
            "messages_per_s_after_resume": pause["messages_per_s_after"],
            "after_resume_to_unpaused": round(
                pause["messages_per_s_after"] / unpaused["send_phase_messages_per_s"], 3
            )
            if unpaused["send_phase_messages_per_s"]
            else None,
            "exactly_once": paused["exactly_once"],
        }
    }
    print(json.dumps(summary), flush=True)
    return 0


def control_campaign(database_url: str, campaign_id: int, verb: str) -> None:
    """Pause or resume the campaign as the route does: the service, in a transaction of its own."""
    from app.mail.campaigns import campaign_control_service

    engine = create_db_engine(database_url, pool_size=1)
    try:
        with transaction(make_session_factory(engine)) as session:
            campaign = session.get(Campaign, campaign_id, with_for_update=True)
            if campaign is None:
                raise RuntimeError(f"no campaign {campaign_id}")
            change = {
                "pause": campaign_control_service.pause_campaign,
                "resume": campaign_control_service.resume_campaign,
            }[verb]
            change(session, campaign, utcnow())
    finally:
        engine.dispose()


@dataclass
class Pause:
    """One pause and resume during a run, in monotonic times and the sink's counts."""

    at: float = 0.0
    delivered: int = 0
    settled_at: float = 0.0
    last_email_at: float = 0.0
    delivered_settled: int = 0
    resumed_at: float = 0.0

    def pause(self, args: argparse.Namespace, campaign_id: int, sink: Sink) -> None:
        control_campaign(args.database_url, campaign_id, "pause")
        # The pause's answer: what the sink had counted by then was sent before it.
        self.at, self.delivered = time.monotonic(), sink.messages
        say(f"paused at {self.delivered:,} delivered")

    def watch(self, args: argparse.Namespace, sink: Sink, engine: Any, campaign_id: int) -> None:
        """Resumes once the sink has been still for a second with nothing of the campaign in flight,
        `--pause-seconds` after the pause at the earliest."""
        now = time.monotonic()
        if self.settled_at == 0.0:
            if now - sink.moved_at < 1.0 or in_flight(engine, campaign_id):
                return
            self.settled_at, self.last_email_at, self.delivered_settled = now, sink.moved_at, sink.messages
            say(f"settled: {sink.messages - self.delivered} emails after the pause's answer")
        if now - self.at < args.pause_seconds:
            return
        if sink.messages != self.delivered_settled:
            raise RuntimeError("an email reached the sink while the campaign was paused")
        control_campaign(args.database_url, campaign_id, "resume")
        self.resumed_at = time.monotonic()
        say("resumed")


def in_flight(engine: Any, campaign_id: int) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM deliverables WHERE campaign_id = :c AND state = 'sending'"),
                {"c": campaign_id},
            ).scalar_one()
        )


def add_dkim_keys(database_url: str, mode: str) -> None:
    """Keys for the seeded campaign's From domain, made and sealed as `tidings dkim create` does."""
    if mode == "none":
        return
    from app.mail.dkim_service import create_key

    engine = create_db_engine(database_url, pool_size=1)
    try:
        with transaction(make_session_factory(engine)) as session:
            for algorithm in mode.split("+"):
                create_key(
                    session,
                    SECRET_KEY,
                    FROM_DOMAIN,
                    selector=f"bench{algorithm}",
                    algorithm=algorithm,
                    now=utcnow(),
                )
    finally:
        engine.dispose()
    say(f"DKIM: {FROM_DOMAIN} signs with {mode}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings()
    n = args.recipients
    load_start = os.getloadavg()[0]
    prepare_database(args.database_url)
    seeded = seed_campaign(args.database_url, n)
    add_dkim_keys(args.database_url, args.dkim)
    size = rendered_size()
    engine = create_db_engine(args.database_url, pool_size=2)

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(scratch_dir()))
        sink = Sink(scratch, dump=not args.no_dump)
        sink.start()
        counts_holder: dict[str, Any] = {}
        stack.callback(lambda: counts_holder.setdefault("counts", sink.stop()))
        reference = sink.reference(args.reference_messages or min(n, 100_000), size, args.reference_sessions)

        base = sink.messages
        sink.watch(base + 1, base + n)
        env = worker_env(args.database_url, sink, scratch, {})
        if args.worker_root:
            env["PYTHONPATH"] = str(args.worker_root.resolve())
        started = time.monotonic()
        workers = [Worker.start(env, scratch, f"worker{k}") for k in range(args.workers)]
        for worker in workers:
            stack.callback(worker.stop)
        say(f"started {args.workers} worker(s): {', '.join(str(w.pid) for w in workers)}")

        samples: dict[str, dict[str, float]] = {}
        pause = Pause()
        fanned_out_at: float | None = None
        done_at: float | None = None
        last_db_check = 0.0
        last_report = started
        while True:
            time.sleep(0.1)
            now = time.monotonic()
            delivered = sink.messages - base
            if args.pause_at and not pause.at and delivered >= args.pause_at * n:
                pause.pause(args, seeded.campaign_id, sink)
            elif pause.at and not pause.resumed_at:
                pause.watch(args, sink, engine, seeded.campaign_id)
            for point in CHECKPOINTS:
                key = f"{point:.0%}"
                if key not in samples and delivered >= point * n:
                    samples[key] = {"delivered": delivered, **memory(workers)}
            if fanned_out_at is None and now - last_db_check >= 0.25:
                last_db_check = now
                if queue_state(engine, seeded.campaign_id).fanned_out:
                    fanned_out_at = now
                    say(f"fanned out after {now - started:.2f}s")
            elif fanned_out_at is not None and (now - last_db_check >= 10 or delivered >= n):
                # Rarely until the sink has them all: counting a million rows costs the database.
                last_db_check = now
                if queue_state(engine, seeded.campaign_id).remaining == 0:
                    done_at = now
                    break
            if now - last_report >= 5:
                last_report = now
                rate = delivered / (now - started)
                say(f"{delivered:,}/{n:,} delivered, {rate:,.0f}/s so far, {memory(workers)}")
            if all(w.process.poll() is not None for w in workers):
                for worker in workers:
                    say(f"worker {worker.pid} exited {worker.process.returncode}:\n{worker.tail()}")
                raise RuntimeError("every worker exited before the campaign was sent")
            if now - started > args.timeout:
                raise RuntimeError(f"not done after {args.timeout:.0f}s: {delivered:,}/{n:,} delivered")

        time.sleep(0.5)  # the last acknowledgements reach the counter
        final_memory = memory(workers)
        cpu = sum(w.cpu_seconds() for w in workers)
        samples.setdefault("100%", {"delivered": sink.messages - base, **final_memory})
        for worker in workers:
            worker.stop()
            if args.log_dir:
                args.log_dir.mkdir(parents=True, exist_ok=True)
                shutil.copy(worker.log, args.log_dir / worker.log.name)
        state = queue_state(engine, seeded.campaign_id, detail=True)
        counts = sink.stop()
        counts_holder["counts"] = counts

    engine.dispose()
    first = sink.watched.get(base + 1)
    last = sink.watched.get(base + n, done_at)
    assert last is not None
    elapsed = last - started
    send_phase = last - (first or started)
    rate = round(n / elapsed, 1)
    check = exactly_once(counts, seeded) if not args.no_dump else {"exactly_once": None}
    peak = final_memory["hwm_mb_each_max"]
    growth = samples["100%"]["rss_mb_each_max"] - samples["10%"]["rss_mb_each_max"] if "10%" in samples else 0
    if pause.resumed_at:
        first_at = first or started
        report_pause = {
            "at_fraction": args.pause_at,
            "pause_to_last_email_s": round(max(0.0, pause.last_email_at - pause.at), 3),
            "emails_after_pause": pause.delivered_settled - pause.delivered,
            "paused_s": round(pause.resumed_at - pause.at, 2),
            "messages_per_s_before": round((pause.delivered - base) / (pause.at - first_at), 1),
            "messages_per_s_after": round(
                (n - (pause.delivered_settled - base)) / (last - pause.resumed_at), 1
            ),
        }
    report = {
        "recipients": n,
        "load_average_1m_at_start_and_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "workers": args.workers,
        "messages_per_s": rate,
        "send_phase_messages_per_s": round(n / send_phase, 1) if send_phase > 0 else 0.0,
        "reference_messages_per_s": reference["messages_per_s"],
        "ratio_to_reference": round(rate / reference["messages_per_s"], 3),
        "peak_rss_mb": peak,
        "rss_growth_10_to_100_mb": round(growth, 1),
        "exactly_once": check["exactly_once"],
        # CPU the worker processes used per email (start-up and fan-out included): what a noisy,
        # shared machine changes least.
        "worker_cpu_us_per_message": round(cpu / n * 1e6, 1),
        "seconds": {
            "total": round(elapsed, 2),
            "fan_out_seen": round(fanned_out_at - started, 2) if fanned_out_at else None,
            "first_delivery": round(first - started, 2) if first else None,
            "send_phase": round(send_phase, 2),
        },
        "memory_mb_at_progress": samples,
        "pause": report_pause if pause.resumed_at else None,
        "delivery": check,
        "deliverables": state.states,
        "reference": reference,
        "targets": {
            "messages_per_s_min": TARGET_MESSAGES_PER_S,
            "peak_rss_mb_max": TARGET_PEAK_RSS_MB,
            "rss_growth_mb_max": FLAT_TOLERANCE_MB,
        },
        "targets_met": {
            "messages_per_s": rate >= TARGET_MESSAGES_PER_S,
            "peak_rss": peak < TARGET_PEAK_RSS_MB,
            "flat_memory": growth <= FLAT_TOLERANCE_MB,
            "exactly_once": check["exactly_once"],
        },
        "settings": {
            "send_batch_size": int(env.get("TIDINGS_SEND_BATCH_SIZE", settings.send_batch_size)),
            "send_concurrency": int(env.get("TIDINGS_SEND_CONCURRENCY", settings.send_concurrency)),
            "send_lanes": int(env.get("TIDINGS_SEND_LANES", settings.send_lanes)),
            "message_bytes": size,
            "sink_dump": not args.no_dump,
            "dkim": args.dkim,
            "cpus": os.cpu_count(),
        },
    }
    return report


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        say("interrupted")
        sys.exit(130)
