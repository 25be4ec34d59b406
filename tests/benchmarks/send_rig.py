"""Shared pieces of the sending benchmarks (send.py, crash.py): a counting SMTP sink, the seed, and
`tidings worker` processes with their memory read from /proc.

The sink is Postfix's `smtp-sink`, a C event loop far faster than anything this machine can send it.
`-c` makes it print a running `mesg=N` counter after every message, which a thread reads for progress.
Per-recipient counts come from its dump (`-D`): it appends every transaction, headed by an
`X-Rcpt-Args: <address>` line per recipient, to one file. That file is a FIFO here, read by `grep`,
which keeps only those lines: nothing grows on disk (a million 9 KB emails would be 9 GB), and the
counts are what the server acknowledged, not what Tidings believes it sent. The dump costs the sink
a few system calls per message, so the reference (`smtp-source`) runs against the same dumping sink.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from api import free_port, prepare_database, say  # noqa: E402
from sqlalchemy import Engine, text  # noqa: E402

from app.db import create_db_engine, make_session_factory, transaction  # noqa: E402
from app.identity.accounts import create_user  # noqa: E402
from app.kit.time import utcnow  # noqa: E402
from app.models import Campaign, CampaignList, ContactList  # noqa: E402

__all__ = ["free_port", "prepare_database", "say"]

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_send"
SECRET_KEY = "bench-" + "k" * 48
# The campaign's From domain (`send.py --dkim` gives it keys).
FROM_DOMAIN = "tidings.example"
RECIPIENT_DOMAIN = "bench.example"
COUNTER = re.compile(rb"mesg=(\d+)")

# A newsletter of about 5 KB: a header, three stories with links, a merge tag with a fallback, a footer.
NEWSLETTER = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>The Weekly Tidings</title>
<style>body{font-family:Georgia,serif;color:#222;max-width:640px;margin:0 auto}
h1{font-size:28px;border-bottom:2px solid #333}h2{font-size:20px;margin-top:28px}
.meta{color:#777;font-size:13px}a{color:#0a58ca}.cta{display:inline-block;padding:10px 18px;
background:#0a58ca;color:#fff;border-radius:4px;text-decoration:none}</style></head>
<body>
<h1>The Weekly Tidings</h1>
<p>Hello {{ first_name | "reader" }},</p>
<p>Here is what happened this week in the small corner of the web we keep an eye on for you. Three
stories, one long read and a tool we have been using every day. As always, reply to this email if
something caught your attention: every message is read by a human.</p>
<h2>1. Queues are tables, and that is fine</h2>
<p class="meta">6 minute read</p>
<p>A practical look at running work queues on the database you already have: claiming rows with
<code>FOR UPDATE SKIP LOCKED</code>, leases for crashed workers and what it costs at a million rows a
day. The short version: less than you think, as long as the hot index stays small and the claim is
one statement.
<a href="https://example.com/articles/queues-are-tables?utm_source=tidings&amp;utm_medium=email">Read
the article</a></p>
<h2>2. The quiet return of plain text email</h2>
<p class="meta">4 minute read</p>
<p>Why several newsletters we admire went back to mostly-text messages, what happened to their open
and click rates, and how to keep a multipart/alternative message readable in both of its parts.
<a href="https://example.org/blog/plain-text-returns">Continue reading</a> or see
<a href="https://example.org/blog/plain-text-returns#data">the data behind it</a>.</p>
<h2>3. Measuring before optimising</h2>
<p class="meta">9 minute read</p>
<p>Profilers lie less than intuition. A walk through sampling a running Python process, reading a
flame graph, and the three places where time usually goes in an I/O-bound service: serialisation,
per-call overhead and waiting for locks you did not know you held.
<a href="https://example.net/posts/measure-first?ref=newsletter">Read it here</a></p>
<h2>The long read</h2>
<p>{{ first_name | "Friend" }}, if you only have time for one thing this weekend, make it this
essay on maintenance: the unglamorous work that keeps software alive, and why teams that plan for
it ship more, not less. It is long, it is worth it, and it comes with a reading list.</p>
<p><a class="cta" href="https://example.com/long-reads/maintenance">Open the long read</a></p>
<h2>Tool of the week</h2>
<p>A tiny command-line utility that turns any directory of Markdown files into a searchable site,
with no configuration. <a href="https://github.com/example/tool-of-the-week">See it on GitHub</a>.</p>
<hr>
<p class="meta">You are receiving this because you subscribed to The Weekly Tidings. Our postal
address: 1 Example Street, Example City. Manage your preferences by replying to this email.</p>
</body></html>
"""
SUBJECT = '{{ first_name | "Friend" }}, this week: queues, plain text and measuring first'


# ------------------------------------------------------------------------------------------- the seed


@dataclass(frozen=True)
class Seeded:
    account_id: int
    campaign_id: int
    recipients: int

    def address(self, n: int) -> str:
        return f"r{n}@{RECIPIENT_DOMAIN}"


def seed_campaign(url: str, recipients: int) -> Seeded:
    """A user, a list of `recipients` contacts (set-based SQL), and a campaign to it scheduled now."""
    engine = create_db_engine(url)
    try:
        with transaction(make_session_factory(engine)) as session:
            user = create_user(
                session, email="sender@bench.example", name="Sender", contact_limit=recipients + 10
            )
            readers = ContactList(account_id=user.account_id, user_id=user.id, name="Readers")
            session.add(readers)
            session.flush()
            account_id, list_id = user.account_id, readers.id
        started = time.perf_counter()
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO contacts (account_id, email, email_key, first_name, last_name,"
                    " created_at, updated_at)"
                    " SELECT :account_id, 'r' || g || '@' || :domain, 'r' || g || '@' || :domain,"
                    " 'First' || g, 'Last' || g, now() at time zone 'utc', now() at time zone 'utc'"
                    " FROM generate_series(1, :n) AS g"
                ),
                {"account_id": account_id, "domain": RECIPIENT_DOMAIN, "n": recipients},
            )
            conn.execute(
                text(
                    "INSERT INTO list_memberships (list_id, contact_id, created_at)"
                    " SELECT :list_id, id, now() at time zone 'utc' FROM contacts WHERE account_id = :a"
                ),
                {"list_id": list_id, "a": account_id},
            )
            conn.execute(
                text("UPDATE accounts SET contacts_count = :n WHERE id = :a"),
                {"n": recipients, "a": account_id},
            )
        with transaction(make_session_factory(engine)) as session:
            campaign = Campaign(
                account_id=account_id,
                title="Weekly",
                subject=SUBJECT,
                html=NEWSLETTER,
                from_name="The Weekly Tidings",
                from_email=f"news@{FROM_DOMAIN}",
                scheduled_at=utcnow(),
            )
            session.add(campaign)
            session.flush()
            session.add(CampaignList(campaign_id=campaign.id, list_id=list_id))
            campaign_id = campaign.id
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))
        say(f"seeded {recipients:,} recipients in {time.perf_counter() - started:.1f}s")
    finally:
        engine.dispose()
    return Seeded(account_id, campaign_id, recipients)


def rendered_size() -> int:
    """Bytes of one rendered email of the seeded campaign (the reference sends messages this big)."""
    from app.mail.sending.render import Recipient, compile_campaign, render
    from app.mail.sending.tokens import MailTokens

    compiled = compile_campaign(1, SUBJECT, NEWSLETTER, "The Weekly Tidings", f"news@{FROM_DOMAIN}")
    recipient = Recipient(123456, f"r123456@{RECIPIENT_DOMAIN}", "First123456", "Last123456", {})
    return len(render(compiled, recipient, MailTokens(SECRET_KEY), "http://127.0.0.1:8000").message)


@dataclass(frozen=True)
class QueueState:
    fanned_out: bool
    total: int
    sent: int
    remaining: int
    states: dict[str, int]


def queue_state(engine: Engine, campaign_id: int, *, detail: bool = False) -> QueueState:
    """Whether the campaign was fanned out, and how many of its rows are still queued or sending."""
    with engine.connect() as conn:
        fanned = conn.execute(
            text("SELECT sent_at IS NOT NULL FROM campaigns WHERE id = :c"), {"c": campaign_id}
        ).scalar_one()
        remaining = conn.execute(
            text(
                "SELECT count(*) FROM deliverables WHERE state IN ('queued', 'sending') AND campaign_id = :c"
            ),
            {"c": campaign_id},
        ).scalar_one()
        states: dict[str, int] = {}
        if detail:
            states = {
                state: int(n)
                for state, n in conn.execute(
                    text("SELECT state, count(*) FROM deliverables WHERE campaign_id = :c GROUP BY state"),
                    {"c": campaign_id},
                )
            }
    return QueueState(bool(fanned), sum(states.values()), states.get("sent", 0), int(remaining), states)


def sent_count(engine: Engine, campaign_id: int) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM deliverables WHERE campaign_id = :c AND state = 'sent'"),
                {"c": campaign_id},
            ).scalar_one()
        )


# ------------------------------------------------------------------------------------------ the sink


@dataclass
class Sink:
    """smtp-sink on a free loopback port, its counter, and (with `dump`) per-recipient counts."""

    scratch: Path
    dump: bool = True
    port: int = 0
    messages: int = 0
    # (monotonic time, counter) whenever the counter passes a watched value
    watched: dict[int, float] = field(default_factory=dict)
    # When the counter last moved (monotonic): the last email on the wire so far
    moved_at: float = 0.0
    _watch: list[int] = field(default_factory=list)
    _process: subprocess.Popen[bytes] | None = None
    _grep: subprocess.Popen[bytes] | None = None
    _hold: int | None = None
    _reader: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    @property
    def rcpt_file(self) -> Path:
        return self.scratch / "rcpts.txt"

    def start(self) -> None:
        if shutil.which("smtp-sink") is None:
            raise RuntimeError("smtp-sink is missing: apt-get install -y postfix")
        self.port = free_port()
        command = ["smtp-sink", "-c"]
        if os.geteuid() == 0:
            command += ["-u", "nobody"]  # smtp-sink refuses to run as root
        if self.dump:
            box = self.scratch / "sink"
            box.mkdir(mode=0o777)
            box.chmod(0o777)
            fifo = box / "dump"
            os.mkfifo(fifo, 0o666)
            fifo.chmod(0o666)
            # Opened read-write (and not inherited) by this script, the FIFO never reports end of file
            # to grep while the sink opens and closes it per transaction; closing it at the end does.
            self._hold = os.open(fifo, os.O_RDWR)
            reading = os.open(fifo, os.O_RDONLY)
            with self.rcpt_file.open("wb") as out:
                self._grep = subprocess.Popen(["grep", "-a", "^X-Rcpt-Args: "], stdin=reading, stdout=out)
            os.close(reading)
            command += ["-D", str(fifo)]
        command += [f"127.0.0.1:{self.port}", "1000"]
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._reader = threading.Thread(target=self._read_counter, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or self._process.poll() is not None:
                    raise RuntimeError("smtp-sink did not start") from None
                time.sleep(0.05)
        say(f"smtp-sink on port {self.port} (pid {self._process.pid}, dump: {self.dump})")

    def watch(self, *values: int) -> None:
        with self._lock:
            self._watch.extend(values)

    def _read_counter(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stream = self._process.stdout
        while chunk := stream.read1(65536):
            found = COUNTER.findall(chunk)
            if not found:
                continue
            now = time.monotonic()
            with self._lock:
                self.messages = int(found[-1])
                self.moved_at = now
                for value in [v for v in self._watch if v <= self.messages]:
                    self.watched[value] = now
                    self._watch.remove(value)

    def stop(self) -> Counter[str]:
        """Stop the sink; with a dump, the number of messages each recipient address received."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            self._process.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=5)
        counts: Counter[str] = Counter()
        if self._grep is not None:
            if self._hold is not None:
                os.close(self._hold)
                self._hold = None
            self._grep.wait(timeout=60)
            self._grep = None
            with self.rcpt_file.open("rb") as lines:
                for line in lines:
                    start, end = line.find(b"<"), line.find(b">")
                    counts[line[start + 1 : end].decode("utf-8", "replace").lower()] += 1
        return counts

    def reference(self, messages: int, size: int, sessions: int) -> dict[str, float]:
        """`smtp-source` against this sink: reused connections (-d) like Tidings' pool; messages/s."""
        if shutil.which("smtp-source") is None:
            raise RuntimeError("smtp-source is missing: apt-get install -y postfix")
        command = ["smtp-source", "-d", "-s", str(sessions), "-l", str(size), "-m", str(messages)]
        command += ["-f", "ref@reference.example", "-t", "ref@reference.example"]
        before = self.messages
        started = time.perf_counter()
        subprocess.run([*command, f"127.0.0.1:{self.port}"], check=True, timeout=600)
        elapsed = time.perf_counter() - started
        time.sleep(0.2)
        received = self.messages - before
        rate = messages / elapsed
        say(f"reference: {messages:,} messages of {size} bytes in {elapsed:.2f}s = {rate:,.0f}/s")
        return {
            "messages": messages,
            "received": received,
            "seconds": round(elapsed, 3),
            "messages_per_s": round(messages / elapsed, 1),
            "sessions": sessions,
            "message_bytes": size,
        }


# -------------------------------------------------------------------------------------- the workers


def worker_env(database_url: str, sink: Sink, scratch: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_SMTP_URL": sink.url,
        "TIDINGS_SECRET_KEY": SECRET_KEY,
        "TIDINGS_VAR_DIR": str(scratch / "var"),
        "TIDINGS_REDIS_URL": "",
        "TIDINGS_DAILY_SEND_LIMIT": "0",
        "TIDINGS_SEND_RATE": "0",
        **extra,
    }
    env.pop("TIDINGS_ENV", None)
    return env


def worker_command() -> list[str]:
    script = Path(sys.executable).parent / "tidings"
    if script.exists():
        return [str(script), "worker"]
    return [sys.executable, "-c", "from app.cli import main; main()", "worker"]


@dataclass
class Worker:
    """One `tidings worker` process in a session of its own, its log in the scratch folder."""

    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, env: dict[str, str], scratch: Path, name: str) -> Worker:
        log = scratch / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                worker_command(),
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return cls(process, log)

    @property
    def pid(self) -> int:
        return self.process.pid

    def memory_kb(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) in kB: resident now and its peak since the process started."""
        rss = hwm = 0
        try:
            with open(f"/proc/{self.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
                    elif line.startswith("VmHWM:"):
                        hwm = int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            pass
        return rss, hwm

    def cpu_seconds(self) -> float:
        """User plus system CPU time the process has used so far."""
        try:
            with open(f"/proc/{self.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            return 0.0
        # Fields 14 and 15 of stat(5) (utime, stime), counted after the parenthesised command name.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self) -> None:
        """kill -9: no clean-up, no QUIT, rows left `sending`."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    # The sink drops root for `nobody`, which must reach its FIFO: a world-traversable folder.
    folder = tempfile.TemporaryDirectory(prefix="tidings-send-bench-")
    Path(folder.name).chmod(0o755)
    return folder


def exactly_once(counts: Counter[str], seeded: Seeded) -> dict[str, int | bool]:
    """Missed, duplicated and unexpected recipients of the campaign, from the sink's counts."""
    expected = {seeded.address(n) for n in range(1, seeded.recipients + 1)}
    received = {address: n for address, n in counts.items() if address.endswith("@" + RECIPIENT_DOMAIN)}
    missed = len(expected - received.keys())
    duplicates = sum(n - 1 for n in received.values() if n > 1)
    duplicated_recipients = sum(1 for n in received.values() if n > 1)
    unexpected = sum(n for address, n in received.items() if address not in expected)
    return {
        "recipients": seeded.recipients,
        "received_messages": sum(received.values()),
        "missed_recipients": missed,
        "duplicate_messages": duplicates,
        "duplicated_recipients": duplicated_recipients,
        "unexpected_messages": unexpected,
        "exactly_once": missed == 0 and duplicates == 0 and unexpected == 0,
    }
