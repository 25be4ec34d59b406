"""Load benchmark of the production shape: `tidings serve --no-scheduler --workers 2` under 256 connections.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing,
since shared machines are noisy. Run from the repository root:

    python3 tests/benchmarks/load.py [--duration 30] [--connections 256] [--database-url URL]

What it does:
  1. Prepares the database as tests/benchmarks/api.py does (empty schema, head revision) and loads
     100,000 contacts into one account with a personal token (the rate limit is lifted for the run).
  2. Serves Tidings with `tidings serve --no-scheduler --workers 1`, loads `GET /me` and then
     `GET /contacts` with `wrk` (256 connections, 30 s each), and stops it.
  3. Does the same with `--workers 2`, the two API processes sharing the port.
  4. Prints one JSON line: requests/s, p50/p99, non-2xx responses and socket errors of each endpoint
     under each shape, and the two-process figure as a multiple of the one-process figure. The target
     (issue 7) is zero errors and zero 5xx under the load.

The servers log as `tidings serve` does (an access line a request) to /dev/null. Needs `wrk` (Debian:
`apt-get install -y wrk`) and PostgreSQL (default 127.0.0.1:5432, user postgres, trust auth). The
servers are stopped on exit, Ctrl-C and errors included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from api import (  # noqa: E402
    WRK_SCRIPT,
    free_port,
    interrupt,
    prepare_database,
    run_wrk,
    say,
    seed,
    served,
)

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_load"
ENDPOINTS = {"me": "/me", "contacts": "/contacts"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL))
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load per endpoint")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of unmeasured load first")
    parser.add_argument("--connections", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--contacts", type=int, default=100_000, help="contacts in the read account")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="API process counts to compare"
    )
    return parser.parse_args(argv)


def load_shape(
    workers: int, token: str, env: dict[str, str], args: argparse.Namespace, script: Path
) -> dict[str, Any]:
    port = free_port()
    command = [sys.executable, "-m", "app", "serve", "--no-scheduler", "--workers", str(workers)]
    command += ["--port", str(port)]
    figures: dict[str, Any] = {}
    with served(f"tidings x{workers}", command, port, env, "/healthz", quiet=True) as base:
        headers = {"Authorization": f"Bearer {token}"}
        for name, path in ENDPOINTS.items():
            url = base + path
            if args.warmup > 0:
                run_wrk(url, headers, args.warmup, args.connections, args.threads, script)
            result = run_wrk(url, headers, args.duration, args.connections, args.threads, script)
            say(
                f"{workers} process(es) GET {path}: {result['requests_per_s']:.0f} req/s, "
                f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, non-2xx {result['non_2xx']}, "
                f"socket errors {result['socket_errors']}"
            )
            figures[name] = result
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("wrk") is None:
        say("wrk is not installed: install it first (Debian: apt-get update && apt-get install -y wrk)")
        return 2
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)

    prepare_database(args.database_url)
    token, _ = seed(args.database_url, args.contacts)

    shapes: dict[str, Any] = {}
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tidings-load-")))
        script = scratch / "report.lua"
        script.write_text(WRK_SCRIPT)
        env = {
            **os.environ,
            "PYTHONPATH": str(HERE.parents[1]),
            "TIDINGS_DATABASE_URL": args.database_url,
            "TIDINGS_MAIL_RATE_LIMIT": "1000000000/minute",
            "TIDINGS_REDIS_URL": "",
            "TIDINGS_VAR_DIR": str(scratch / "var"),
            "TIDINGS_SECRET_KEY": "bench-" + "x" * 48,
        }
        env.pop("TIDINGS_ENV", None)
        for workers in args.workers:
            shapes[f"workers_{workers}"] = load_shape(workers, token, env, args, script)

    report: dict[str, Any] = {**shapes}
    if "workers_1" in shapes and "workers_2" in shapes:
        report["two_over_one"] = {
            name: round(
                shapes["workers_2"][name]["requests_per_s"] / shapes["workers_1"][name]["requests_per_s"], 2
            )
            for name in ENDPOINTS
            if shapes["workers_1"][name]["requests_per_s"]
        }
    errors = sum(r["non_2xx"] + r["socket_errors"] for shape in shapes.values() for r in shape.values())
    report["errors"] = errors
    report["target_met"] = errors == 0
    report["settings"] = {
        "duration_s": args.duration,
        "connections": args.connections,
        "wrk_threads": args.threads,
        "contacts": args.contacts,
        "cpus": os.cpu_count(),
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        say("interrupted")
