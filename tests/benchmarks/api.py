"""API throughput benchmark: Tidings against a bare FastAPI app, one uvicorn worker each, on PostgreSQL.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing,
since shared machines are noisy. Run from the repository root:

    python3 tests/benchmarks/api.py [--duration 10] [--connections 32] [--database-url URL]

What it does:
  1. Creates the database if missing, drops and recreates its public schema, migrates to head.
  2. Makes one user with a personal token and loads 100,000 contacts into its account.
  3. Starts Tidings and the reference app (tests/benchmarks/reference_app.py), each as one uvicorn
     worker with the same flags, and loads each with `wrk` (32 connections): GET /me and
     GET /contacts?page=500 against Tidings, GET / against the reference.
  4. Posts 100 batches of 1000 new contacts to POST /contacts/batch, one after another.
  5. Prints one JSON line with the figures and the targets on stdout; progress goes to stderr.

Needs `wrk` (Debian: `apt-get install -y wrk`) and a PostgreSQL server (default 127.0.0.1:5432, user
postgres, trust auth). The servers are stopped on exit, Ctrl-C and errors included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from sqlalchemy import text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from app.db import create_db_engine, make_session_factory, transaction  # noqa: E402
from app.identity.accounts import create_user  # noqa: E402
from app.identity.tokens import create_personal_token  # noqa: E402
from app.migrate import upgrade_to_head  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_api"

TARGET_ME_RATIO = 0.25  # GET /me: at least a quarter of the reference's requests/s
TARGET_CONTACTS_P99_MS = 50.0  # GET /contacts?page=500: p99 under 50 ms
TARGET_BATCH_CONTACTS_PER_S = 10_000.0  # POST /contacts/batch: at least 10,000 contacts/s

SERVER_FLAGS = ["--workers", "1", "--log-level", "warning", "--no-access-log"]

# wrk counts responses with a status above 399 as errors.status; `done` prints the figures as JSON.
WRK_SCRIPT = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50_us":%.1f,"p90_us":%.1f,"p99_us":%.1f,"max_us":%.1f,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
"""


def say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ database


def libpq_conninfo(url: str, database: str) -> str:
    parsed = make_url(url)
    parts = {
        "host": parsed.host or "127.0.0.1",
        "port": str(parsed.port or 5432),
        "user": parsed.username or "postgres",
        "dbname": database,
    }
    if parsed.password:
        parts["password"] = parsed.password
    return " ".join(f"{k}={v}" for k, v in parts.items())


def prepare_database(url: str) -> None:
    """Create the database if missing, then start from an empty public schema at the head revision."""
    name = make_url(url).database
    assert name, "the database URL must name a database"
    with psycopg.connect(libpq_conninfo(url, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            say(f"creating database {name}")
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(libpq_conninfo(url, name), autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")
    say("migrating to head")
    upgrade_to_head(url)


def seed(url: str, contacts: int) -> tuple[str, str]:
    """A user with `contacts` contacts, and a second, empty one for the batch run; their tokens."""
    engine = create_db_engine(url)
    factory = make_session_factory(engine)
    try:
        with transaction(factory) as session:
            reader = create_user(
                session, email="reader@bench.example", name="Reader", contact_limit=10_000_000
            )
            _, reader_token = create_personal_token(session, reader, "bench")
            writer = create_user(
                session, email="writer@bench.example", name="Writer", contact_limit=10_000_000
            )
            _, writer_token = create_personal_token(session, writer, "bench")
            account_id = reader.account_id
        started = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO contacts (account_id, email, email_key, first_name, last_name,"
                    " created_at, updated_at)"
                    " SELECT :account_id, 'Contact' || g || '@bench.example',"
                    " 'contact' || g || '@bench.example', 'First' || g, 'Last' || g,"
                    " now() at time zone 'utc', now() at time zone 'utc'"
                    " FROM generate_series(1, :n) AS g"
                ),
                {"account_id": account_id, "n": contacts},
            )
            conn.execute(
                text(
                    "UPDATE accounts SET contacts_count = (SELECT count(*) FROM contacts"
                    " WHERE account_id = :account_id AND deleted_at IS NULL) WHERE id = :account_id"
                ),
                {"account_id": account_id},
            )
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))
        say(f"loaded {contacts:,} contacts in {time.perf_counter() - started:.1f}s")
    finally:
        engine.dispose()
    return reader_token, writer_token


# ------------------------------------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(process: subprocess.Popen[bytes], name: str) -> None:
    if process.poll() is not None:
        return
    say(f"stopping {name} (pid {process.pid})")
    try:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: the worker and anything it started
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextmanager
def server(name: str, app_args: list[str], port: int, env: dict[str, str], ready_path: str) -> Iterator[str]:
    """One uvicorn worker in a session of its own; yields its base URL once `ready_path` answers 200."""
    command = [sys.executable, "-m", "uvicorn", *app_args, "--host", "127.0.0.1", "--port", str(port)]
    with served(name, [*command, *SERVER_FLAGS], port, env, ready_path) as base:
        yield base


@contextmanager
def served(
    name: str, command: list[str], port: int, env: dict[str, str], ready_path: str, quiet: bool = False
) -> Iterator[str]:
    """`command` (a server listening on `port`) in a session of its own; yields its base URL once
    `ready_path` answers 200. `quiet` discards its output (an access log under load)."""
    output = subprocess.DEVNULL if quiet else None
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=output,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        say(f"started {name} on port {port} (pid {process.pid})")
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with status {process.returncode} before it was ready")
            try:
                if httpx.get(base + ready_path, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not answer {ready_path} within 60s")
            time.sleep(0.1)
        yield base
    finally:
        stop(process, name)


# --------------------------------------------------------------------------------------------- load


def run_wrk(
    url: str, headers: dict[str, str], duration: float, connections: int, threads: int, script: Path
) -> dict[str, Any]:
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration:g}s", "--timeout", "10s"]
    for key, value in headers.items():
        command += ["-H", f"{key}: {value}"]
    command += ["-s", str(script), url]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=duration + 60)
    if result.returncode != 0:
        raise RuntimeError(f"wrk failed ({result.returncode}): {result.stderr.strip()}")
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary:\n{result.stdout}\n{result.stderr}")
    raw: dict[str, Any] = json.loads(line.removeprefix("WRKJSON "))
    seconds = raw["duration_us"] / 1e6
    return {
        "requests": raw["requests"],
        "requests_per_s": round(raw["requests"] / seconds, 1) if seconds else 0.0,
        "p50_ms": round(raw["p50_us"] / 1000, 2),
        "p90_ms": round(raw["p90_us"] / 1000, 2),
        "p99_ms": round(raw["p99_us"] / 1000, 2),
        "max_ms": round(raw["max_us"] / 1000, 2),
        # wrk counts every response with a status of 400 or more; these endpoints do not redirect.
        "non_2xx": raw["status"],
        "socket_errors": raw["connect"] + raw["read"] + raw["write"] + raw["timeout"],
    }


def load(
    name: str,
    url: str,
    headers: dict[str, str],
    args: argparse.Namespace,
    script: Path,
) -> dict[str, Any]:
    check = httpx.get(url, headers=headers, timeout=30)
    if check.status_code != 200:
        say(f"warning: {name} answered {check.status_code} before the load: {check.text[:200]}")
    if args.warmup > 0:
        run_wrk(url, headers, args.warmup, args.connections, args.threads, script)
    figures = run_wrk(url, headers, args.duration, args.connections, args.threads, script)
    say(
        f"{name}: {figures['requests_per_s']:.0f} req/s, p50 {figures['p50_ms']} ms, "
        f"p99 {figures['p99_ms']} ms, non-2xx {figures['non_2xx']}, socket errors {figures['socket_errors']}"
    )
    return figures


def time_batches(base: str, token: str, batches: int, size: int) -> dict[str, Any]:
    """`batches` sequential POST /contacts/batch of `size` new contacts each; contacts per second."""
    bodies = [
        json.dumps(
            {
                "contacts": [
                    {
                        "email": f"Batch{b}-{i}@bench.example",
                        "first_name": f"First{i}",
                        "last_name": f"Last{b}",
                    }
                    for i in range(size)
                ]
            }
        ).encode()
        for b in range(batches)
    ]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    failures = 0
    created = 0
    latencies: list[float] = []
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        started = time.perf_counter()
        for body in bodies:
            sent = time.perf_counter()
            response = client.post("/contacts/batch", content=body)
            latencies.append(time.perf_counter() - sent)
            if response.status_code == 200:
                created += int(response.json().get("created", 0))
            else:
                failures += 1
                if failures == 1:
                    say(f"batch failed with {response.status_code}: {response.text[:200]}")
        elapsed = time.perf_counter() - started
    latencies.sort()
    figures = {
        "batches": batches,
        "batch_size": size,
        "created": created,
        "non_2xx": failures,
        "seconds": round(elapsed, 3),
        "contacts_per_s": round(batches * size / elapsed, 1),
        "batch_p50_ms": round(latencies[len(latencies) // 2] * 1000, 1),
        "batch_max_ms": round(latencies[-1] * 1000, 1),
    }
    say(
        f"batch: {batches} x {size} in {elapsed:.2f}s = {figures['contacts_per_s']:.0f} contacts/s, "
        f"{created:,} created, {failures} failed"
    )
    return figures


# ---------------------------------------------------------------------------------------------- main


def interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL))
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load per endpoint")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of unmeasured load first")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--contacts", type=int, default=100_000, help="contacts in the read account")
    parser.add_argument("--page", type=int, default=500, help="page of GET /contacts to load")
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=1000)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("wrk") is None:
        say("wrk is not installed: install it first (Debian: apt-get update && apt-get install -y wrk)")
        return 2
    # SIGTERM and SIGHUP unwind like Ctrl-C, so the servers are stopped either way; SIGINT is set
    # explicitly because a shell starts background jobs with it ignored.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)

    prepare_database(args.database_url)
    reader_token, writer_token = seed(args.database_url, args.contacts)

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tidings-bench-")))
        script = scratch / "report.lua"
        script.write_text(WRK_SCRIPT)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "TIDINGS_DATABASE_URL": args.database_url,
            "TIDINGS_MAIL_RATE_LIMIT": "100000000/minute",
            "TIDINGS_REDIS_URL": "",
            "TIDINGS_VAR_DIR": str(scratch / "var"),
            "TIDINGS_SECRET_KEY": "bench-" + "x" * 48,
        }
        env.pop("TIDINGS_ENV", None)
        tidings = stack.enter_context(
            server("tidings", ["app.main:create_app", "--factory"], free_port(), env, "/healthz")
        )
        reference = stack.enter_context(
            server(
                "reference",
                ["--app-dir", str(HERE), "reference_app:create_app", "--factory"],
                free_port(),
                env,
                "/",
            )
        )
        auth = {"Authorization": f"Bearer {reader_token}"}
        results: dict[str, Any] = {}
        results["reference"] = load("reference GET /", reference + "/", {}, args, script)
        results["me"] = load("tidings GET /me", tidings + "/me", auth, args, script)
        results["contacts_page_500"] = load(
            f"tidings GET /contacts?page={args.page}",
            f"{tidings}/contacts?page={args.page}",
            auth,
            args,
            script,
        )
        batch = time_batches(tidings, writer_token, args.batches, args.batch_size)

    reference_rps = results["reference"]["requests_per_s"]
    ratio_me = round(results["me"]["requests_per_s"] / reference_rps, 3) if reference_rps else 0.0
    ratio_contacts = (
        round(results["contacts_page_500"]["requests_per_s"] / reference_rps, 3) if reference_rps else 0.0
    )
    report = {
        "me": results["me"],
        "contacts_page_500": results["contacts_page_500"],
        "reference": results["reference"],
        "ratio_me_to_reference": ratio_me,
        "ratio_contacts_to_reference": ratio_contacts,
        "batch_contacts_per_s": batch["contacts_per_s"],
        "batch": batch,
        "targets": {
            "me_ratio_min": TARGET_ME_RATIO,
            "contacts_p99_ms_max": TARGET_CONTACTS_P99_MS,
            "batch_contacts_per_s_min": TARGET_BATCH_CONTACTS_PER_S,
        },
        "targets_met": {
            "me_ratio": ratio_me >= TARGET_ME_RATIO,
            "contacts_p99": results["contacts_page_500"]["p99_ms"] < TARGET_CONTACTS_P99_MS,
            "batch_contacts_per_s": batch["contacts_per_s"] >= TARGET_BATCH_CONTACTS_PER_S,
        },
        "settings": {
            "duration_s": args.duration,
            "connections": args.connections,
            "wrk_threads": args.threads,
            "contacts": args.contacts,
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
