"""Sending benchmark: one campaign to 100,000 recipients through `tidings worker` into Postfix's smtp-sink.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing,
since shared machines are noisy. Run from the repository root:

    python3 tests/benchmarks/send.py [--recipients 100000] [--workers 1] [--database-url URL]
    python3 tests/benchmarks/send.py --recipients 1000000      # memory stays flat as the campaign grows
    python3 tests/benchmarks/send.py --dkim rsa                # the campaign's domain has a DKIM key
    python3 tests/benchmarks/send.py --dkim-compare            # without a key, then with one: the cost

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
from pathlib import Path
from typing import Any

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
        fanned_out_at: float | None = None
        done_at: float | None = None
        last_db_check = 0.0
        last_report = started
        while True:
            time.sleep(0.1)
            now = time.monotonic()
            delivered = sink.messages - base
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
