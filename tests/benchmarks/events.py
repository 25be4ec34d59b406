"""Events-out benchmark: opens recorded through `/t/o` become signed `contact.opened` deliveries.

A script, not a test (pytest does not collect this folder). It measures and prints; it asserts nothing.
Run from the repository root:

    python3 tests/benchmarks/events.py [--opens 20000] [--fail-percent 10] [--database-url URL]
                                       [--together | --opens-only | --seed-events]

What it does:
  1. Drops and recreates the public schema of the database (default `bench_events`), migrates to head,
     and seeds a user, N contacts, a sent campaign and one sent email (deliverable) per contact.
  2. Starts a receiver in its own process (asyncio, HTTP/1.1 keep-alive) that verifies every delivery's
     signature with the `standardwebhooks` library and answers 500 once to `--fail-percent` of the
     events (chosen by their `webhook-id`), 204 otherwise.
  3. Starts `tidings serve` (uvicorn on uvloop, its scheduler on: the delivery lanes run in it) and
     registers the receiver with `POST /webhooks` for `contact.opened`.
  4. Opens each email once through `GET /t/o/{token}` (64 requests in flight) against
     `tidings serve --no-scheduler`, then starts one `tidings worker` (`--workers N`: N of them) and
     waits until the receiver has acknowledged every event (`--together`: serve's own lanes deliver
     while the opens arrive).
     `--opens-only` measures `/t/o` alone, with no webhook, as the reference for the opens' rate.
  5. Prints one JSON line: `delivery_events_per_s` (the events queued when the last open was recorded,
     over the time the delivery took from then: the delivery rate, whose target is 1,000, and
     `ratio_to_target`), the opens' own rate through `/t/o` and the whole from the first open to the last
     acknowledged event (bound by the slower of the two), and the exactly-once check: duplicates (an
     event acknowledged twice) and lost (an event never acknowledged), both 0 when all is well.

`--seed-events` skips `/t/o`: the same `contact.opened` events are written straight into the outbox by
`emit_contact_events` (what `/t/o` calls), then the worker delivers them as in the default run. It is
for iterating on delivery in a minute instead of several; the figure for the target comes from the
default run. `worker_cpu_ms_per_event` (the worker's CPU time, start-up included, over the events) is
steadier than the rates on a shared machine: compare changes by it too.

Figures (2 cores, 2026-11-26; docs/performance.md has the details): the default run with 20,000 opens
delivered 2,056 to 2,529 events/s with one worker (2.1 to 2.5 of the 1,000 target; 0.31 to 0.38 ms
of the worker's CPU an event), none twice, none lost, every signature valid; f5fc89b (outbound calls on
httpx) 715 events/s (1.34 ms) in the same session. The opens came through /t/o at 852 a second (183
before the pixel recorded opens on the event loop), 602 events/s from the first open to the last event.

Needs a PostgreSQL server (default 127.0.0.1:5432, user postgres, trust auth).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parent))

from send_rig import free_port, prepare_database, say

from app.config import Settings
from app.db import create_db_engine, make_session_factory, transaction
from app.identity.accounts import create_user
from app.identity.tokens import create_personal_token
from app.kit.time import utcnow
from app.mail.events.emit import ContactEvent, emit_contact_events
from app.mail.events.types import EventType
from app.mail.sending.tokens import MailTokens
from app.models import Campaign

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_events"
SECRET_KEY = "bench-events-secret-key-long-enough-to-sign"
HOOK_SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # 24 bytes of base64
TARGET_EVENTS_PER_S = 1000.0


# ------------------------------------------------------------------------------------------ the receiver


def receiver_main(port: int, fail_percent: int, report: Any) -> None:
    """A minimal HTTP/1.1 server: verify, fail some events once, count acknowledgements per id."""
    from standardwebhooks import Webhook

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    verifier = Webhook(HOOK_SECRET)
    acknowledged: dict[str, int] = {}
    failed_once: set[str] = set()
    bad_signatures = 0

    class Conn(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            self.buffer = b""

        def data_received(self, data: bytes) -> None:
            nonlocal bad_signatures
            self.buffer += data
            while True:
                head_end = self.buffer.find(b"\r\n\r\n")
                if head_end < 0:
                    return
                head = self.buffer[:head_end].decode("latin-1").split("\r\n")
                headers = {}
                for line in head[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                if len(self.buffer) < head_end + 4 + length:
                    return
                body = self.buffer[head_end + 4 : head_end + 4 + length]
                self.buffer = self.buffer[head_end + 4 + length :]
                msg_id = headers.get("webhook-id", "")
                try:
                    verifier.verify(body, headers)
                except Exception:
                    bad_signatures += 1
                    self.answer(401)
                    continue
                if int(msg_id.rsplit("_", 1)[-1]) % 100 < fail_percent and msg_id not in failed_once:
                    failed_once.add(msg_id)
                    self.answer(500)
                    continue
                acknowledged[msg_id] = acknowledged.get(msg_id, 0) + 1
                self.answer(204)

        def answer(self, status: int) -> None:
            reason = {204: "No Content", 401: "Unauthorized", 500: "Internal Server Error"}[status]
            self.transport.write(f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\n\r\n".encode())

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Conn, "127.0.0.1", port, backlog=1024)
        report.put(("ready", None))
        while True:
            await asyncio.sleep(0.2)
            report.put(
                ("count", (len(acknowledged), sum(acknowledged.values()), len(failed_once), bad_signatures))
            )
            if os.getppid() == 1:
                server.close()
                return

    asyncio.run(serve())


# ------------------------------------------------------------------------------------------------- seed


def seed(url: str, opens: int) -> tuple[str, list[int]]:
    """A user with a token, `opens` contacts and one sent email each; (token, deliverable ids)."""
    engine = create_db_engine(url)
    try:
        with transaction(make_session_factory(engine)) as session:
            user = create_user(session, email="events@bench.example", name="Bench", contact_limit=opens + 10)
            _, token = create_personal_token(session, user, "bench")
            campaign = Campaign(
                account_id=user.account_id,
                title="Opened",
                subject="Hello",
                html="<p>Hello</p>",
                from_name="Bench",
                from_email="bench@bench.example",
            )
            session.add(campaign)
            session.flush()
            account_id, campaign_id = user.account_id, campaign.id
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO contacts (account_id, email, email_key, created_at, updated_at)"
                    " SELECT :a, 'o' || g || '@bench.example', 'o' || g || '@bench.example',"
                    " now() at time zone 'utc', now() at time zone 'utc' FROM generate_series(1, :n) g"
                ),
                {"a": account_id, "n": opens},
            )
            conn.execute(
                text(
                    "INSERT INTO deliverables (account_id, campaign_id, contact_id, state, attempts,"
                    " sent_at, created_at, updated_at)"
                    " SELECT :a, :c, id, 'sent', 1, now() at time zone 'utc', now() at time zone 'utc',"
                    " now() at time zone 'utc' FROM contacts WHERE account_id = :a"
                ),
                {"a": account_id, "c": campaign_id},
            )
            conn.execute(
                text(
                    "UPDATE campaigns SET sent_at = now() at time zone 'utc',"
                    " finished_at = now() at time zone 'utc' WHERE id = :c"
                ),
                {"c": campaign_id},
            )
            ids = [row[0] for row in conn.execute(text("SELECT id FROM deliverables ORDER BY id"))]
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))
    finally:
        engine.dispose()
    return token, ids


def seed_open_events(url: str) -> None:
    """`--seed-events`: each sent email's `contact.opened` event written into the outbox by the same
    function `/t/o` calls, in one transaction, instead of through the pixel."""
    engine = create_db_engine(url)
    try:
        with transaction(make_session_factory(engine)) as session:
            rows = session.execute(
                text("SELECT account_id, campaign_id, contact_id FROM deliverables ORDER BY id")
            ).all()
            now = utcnow()
            emit_contact_events(
                session,
                rows[0].account_id,
                EventType.CONTACT_OPENED,
                [ContactEvent(row.contact_id, campaign_id=row.campaign_id) for row in rows],
                now,
            )
    finally:
        engine.dispose()


def cpu_seconds(pid: int) -> float | None:
    """A live process's user and system CPU time so far, from /proc (None where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------------------------- main


async def open_all(base: str, tokens: list[str], concurrency: int = 64) -> float:
    """GET every open pixel once; the seconds it took."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for token in tokens:
        queue.put_nowait(token)
    started = time.perf_counter()
    # aiohttp: an httpx client would need a core of its own at the rate the pixel answers.
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(base_url=base, connector=connector) as client:

        async def opener() -> None:
            while not queue.empty():
                token = queue.get_nowait()
                async with client.get(f"/t/o/{token}") as response:
                    await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"/t/o answered {response.status}")

        await asyncio.gather(*(opener() for _ in range(concurrency)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--opens", type=int, default=20_000)
    parser.add_argument("--fail-percent", type=int, default=10)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument(
        "--together",
        action="store_true",
        help="serve's own lanes deliver while the opens arrive (default: serve --no-scheduler takes the"
        " opens, then a tidings worker delivers the queued events, timed from its start)",
    )
    parser.add_argument(
        "--seed-events",
        action="store_true",
        help="no /t/o: write the opens' events straight into the outbox (emit_contact_events, as /t/o"
        " does), then time the worker's delivery alone; for iterating on delivery, not the target's figure",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="how many tidings worker processes deliver (an operator scales delivery by running more;"
        " they share the outbox through row locks)",
    )
    parser.add_argument(
        "--opens-only", action="store_true", help="no webhook: the reference rate of /t/o alone, same machine"
    )
    args = parser.parse_args()

    prepare_database(args.database_url)
    token, deliverable_ids = seed(args.database_url, args.opens)
    say(f"seeded {args.opens:,} sent emails")

    receiver_port, serve_port = free_port(), free_port()
    report: Any = multiprocessing.Queue()
    receiver = multiprocessing.Process(
        target=receiver_main, args=(receiver_port, args.fail_percent, report), daemon=True
    )
    receiver.start()
    assert report.get(timeout=10)[0] == "ready"

    env = {
        **os.environ,
        "TIDINGS_DATABASE_URL": args.database_url,
        "TIDINGS_SECRET_KEY": SECRET_KEY,
        "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "true",
        "TIDINGS_MAIL_RATE_LIMIT": "1000000/minute",
        "TIDINGS_LOG_LEVEL": "warning",
    }
    script = Path(sys.executable).with_name("tidings")
    log = open(os.environ.get("BENCH_SERVE_LOG", "/tmp/bench-events-serve.log"), "wb")  # noqa: SIM115
    served = subprocess.Popen(
        [
            str(script),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(serve_port),
            *([] if args.together else ["--no-scheduler"]),
        ],
        env=env,
        # Its log goes to a file: a pipe nobody reads would fill and stall the server.
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{serve_port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        mail_tokens = MailTokens(Settings(secret_key=SECRET_KEY).resolved_secret_key)
        pixels = [mail_tokens.open_token(deliverable_id) for deliverable_id in deliverable_ids]
        if args.opens_only:
            seconds = asyncio.run(open_all(base, pixels))
            print(
                json.dumps(
                    {"opens": args.opens, "opens_per_s": round(args.opens / seconds, 1), "webhook": None}
                )
            )
            return
        hook = httpx.post(
            base + "/webhooks",
            json={
                "url": f"http://127.0.0.1:{receiver_port}/events",
                "events": ["contact.opened"],
                "secret": HOOK_SECRET,
            },
            headers={"Authorization": f"Bearer {token}"},
        )
        hook.raise_for_status()

        started = time.perf_counter()
        if args.seed_events:
            seed_open_events(args.database_url)
        else:
            asyncio.run(open_all(base, pixels))
        open_seconds = time.perf_counter() - started
        opened = time.perf_counter()
        what = "open events seeded" if args.seed_events else "opens recorded"
        say(f"{len(pixels):,} {what} in {open_seconds:.1f}s")
        counts = (0, 0, 0, 0)
        while not report.empty():
            kind, value = report.get()
            if kind == "count":
                counts = value
        acknowledged_when_opened = counts[0]
        workers: list[subprocess.Popen[bytes]] = []
        if not args.together:
            opened = time.perf_counter()
            workers = [
                subprocess.Popen([str(script), "worker"], env=env, stdout=log, stderr=subprocess.STDOUT)
                for _ in range(max(1, args.workers))
            ]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            kind, value = report.get(timeout=30)
            if kind == "count":
                counts = value
                if counts[0] >= args.opens:
                    break
        finished = time.perf_counter()
        worker_cpu = sum(cpu_seconds(worker.pid) or 0.0 for worker in workers) if workers else None
        time.sleep(3)  # anything delivered twice would arrive in these seconds
        while not report.empty():
            kind, value = report.get()
            if kind == "count":
                counts = value
    finally:
        for worker in locals().get("workers") or []:
            worker.terminate()
            worker.wait(timeout=30)
        served.terminate()
        served.wait(timeout=30)
        receiver.terminate()
        log.close()
    unique, total, failed, bad = counts
    seconds = finished - started
    # With --together the lanes keep pace with the opens, and what is left after the last one is a
    # remnant (waiting on the lanes' next poll), not a rate: the whole from the first open is the figure.
    delivery_rate = (
        None if args.together else (unique - acknowledged_when_opened) / max(finished - opened, 1e-9)
    )
    result = {
        "opens": args.opens,
        "events_acknowledged": unique,
        "opens_through": "the outbox, seeded (--seed-events)" if args.seed_events else "/t/o",
        "delivered_by": "serve's lanes, during the opens"
        if args.together
        else f"{max(1, args.workers)} tidings worker process(es), after the opens",
        # The target's figure: the events still queued when the last open was recorded (all of them,
        # unless --together), over the time from then (the workers' start) to the last acknowledgement.
        "backlog_at_last_open": args.opens - acknowledged_when_opened,
        "delivery_events_per_s": None if delivery_rate is None else round(delivery_rate, 1),
        "target_events_per_s": TARGET_EVENTS_PER_S,
        "ratio_to_target": None if delivery_rate is None else round(delivery_rate / TARGET_EVENTS_PER_S, 2),
        # The opens' own rate (the email API's /t/o request path, one process), and the whole: from the
        # first open to the last acknowledged event, which the slower of the two bounds.
        "opens_per_s": None if args.seed_events else round(args.opens / open_seconds, 1),
        "seconds_first_open_to_last_event": round(seconds, 2),
        "first_open_to_last_event_per_s": round(unique / seconds, 1),
        # The workers' CPU time (start-up included) per event: steadier than the rate on a shared machine.
        "worker_cpu_ms_per_event": round(1000 * worker_cpu / unique, 2) if worker_cpu and unique else None,
        "answered_500_once": failed,
        "duplicates": total - unique,
        "lost": args.opens - unique,
        "bad_signatures": bad,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
