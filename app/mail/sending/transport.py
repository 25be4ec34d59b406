"""Where rendered emails go: an SMTP relay over a pool of reused connections, or a Maildir on disk.

`TIDINGS_SMTP_URL` picks the relay: `smtp://user:pass@host:587?starttls=1` or `smtps://host:465`
(implicit TLS), or several, separated by spaces or commas, with a `weight` each and a relay of their own
for some sending domains (`domains=`): `RelayRouter` chooses among them. Left empty, every email is
written to the Maildir `./var/outbox`, so the embedded set-up sends with no mail server at all.

A send either returns, or raises `TemporaryFailure` (an SMTP 4xx, a dropped connection, a timeout: try
again later; `Deferred`, a kind of it, when the relay or receiver asked to slow down, see pace.py) or
`PermanentFailure` (an SMTP 5xx: this recipient fails, the rest of the campaign goes on).
"""

from __future__ import annotations

import asyncio
import mailbox
import os
import random
import re
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from app.kit.flags import TRUE_WORDS
from app.mail.bounces.bounce_classes import classify
from app.mail.sending.pace import Pace, is_throttle
from app.mail.sending.smtp import (
    SMTP_TIMEOUT_SECONDS,
    HeldContent,
    SmtpConnection,
    SmtpProtocolError,
    SmtpReplyError,
    SmtpUnsupported,
)

RECONNECT_PAUSE_SECONDS = 5.0
# How long the check at start waits for the relay to take a connection.
RELAY_PROBE_SECONDS = 3.0
# A relay at its cap makes an email wait this long for its turn at most; a later turn is a deferral.
MAX_PACE_WAIT_SECONDS = 1.0
# How long receivers count a rate over (TIDINGS_SMTP_THROTTLE_WINDOW's default): see pace.py.
THROTTLE_WINDOW_SECONDS = 60.0
# Where one relay's URL ends and the next one's starts in TIDINGS_SMTP_URL.
RELAY_SEPARATOR = re.compile(r"[\s,]+(?=smtps?://)", re.IGNORECASE)
# Control characters, angle brackets and spaces cannot be in an envelope address (command injection).
UNSAFE_ADDRESS = re.compile(r"[\x00-\x20\x7f<>]")


class TemporaryFailure(Exception):
    """Worth another try later (4xx, network trouble)."""


class RelayUnreachable(TemporaryFailure):
    """The relay refused or dropped the connection, the greeting, STARTTLS or the login: another relay
    may take the email at once (RelayRouter)."""


class Throttled(TemporaryFailure):
    """A throttle reply (pace.is_throttle): the email was early, not failing."""


class Deferred(TemporaryFailure):
    """Not sent now, by the relay's or the receiving domain's pace: send it `delay` seconds from now.
    Never a failure: the email does not spend an attempt."""

    def __init__(self, message: str, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentFailure(Exception):
    """Refused for good (5xx). `bounce` is set when the server refused the recipient's address (a hard
    bounce), `blocked` when it refused the sender (policy, authentication, reputation: bounce_classes.py)."""

    def __init__(self, message: str, *, bounce: bool, blocked: bool = False) -> None:
        super().__init__(message)
        self.bounce = bounce
        self.blocked = blocked


@dataclass(frozen=True, slots=True)
class SmtpRelay:
    """Where TIDINGS_SMTP_URL points, read once: the settings check it at start (`Settings`) and the
    transport connects with it, so both read the URL the same way."""

    hostname: str
    port: int
    implicit_tls: bool
    starttls: bool
    verify_tls: bool
    username: str | None
    password: str | None
    # Its share of the email when there are several relays (of the same sending domains).
    weight: float = 1.0
    # The sending (From) domains it alone sends for; empty: every domain without a relay of its own.
    domains: tuple[str, ...] = ()
    # At most this many emails a second (`rate=`); None: no cap.
    rate: float | None = None
    # `passthrough=1`: it passes the receivers' replies on, so a throttle is about one receiving domain.
    passthrough: bool = False

    @property
    def name(self) -> str:
        """How the log and /metrics call it (never with its credentials)."""
        return f"{self.hostname}:{self.port}"

    @classmethod
    def from_url(cls, url: str) -> SmtpRelay:
        """ValueError says what is wrong with the URL and what it may look like."""
        allowed = "write it as smtp://user:pass@host:587?starttls=1 or smtps://user:pass@host:465"
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps"):
            raise ValueError(f"not an smtp:// or smtps:// URL; {allowed}")
        if not parts.hostname:
            raise ValueError(f"names no host; {allowed}")
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"its port is not a number from 1 to 65535; {allowed}") from exc
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        implicit_tls = parts.scheme == "smtps"
        weight = _positive(query.get("weight", "1"), "weight", allowed)
        rate = _positive(query["rate"], "rate", allowed) if "rate" in query else None
        domains = tuple(d.strip().lower() for d in query.get("domains", "").split(",") if d.strip())
        return cls(
            hostname=parts.hostname,
            port=port or (465 if implicit_tls else 25),
            implicit_tls=implicit_tls,
            starttls=query.get("starttls", "").lower() in TRUE_WORDS,
            verify_tls=query.get("verify", "1").lower() in TRUE_WORDS,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            weight=weight,
            domains=domains,
            rate=rate,
            passthrough=query.get("passthrough", "").lower() in TRUE_WORDS,
        )


def parse_relays(value: str) -> list[SmtpRelay]:
    """The relays of TIDINGS_SMTP_URL (one or several, separated by spaces or commas). ValueError says
    which one is wrong and how."""
    relays = []
    for position, url in enumerate(RELAY_SEPARATOR.split(value.strip()), start=1):
        try:
            relays.append(SmtpRelay.from_url(url.strip().rstrip(",")))
        except ValueError as exc:
            raise ValueError(f"relay {position}: {exc}" if position > 1 else str(exc)) from exc
    return relays


def _positive(value: str, name: str, allowed: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number < float("inf"):
        raise ValueError(f"its {name} is not a positive number; {allowed}")
    return number


def network_reason(exc: BaseException) -> str:
    """Why a connection failed, in the words an operator searches for ("Connection refused"), not
    asyncio's ("[Errno 111] Connect call failed ('127.0.0.1', 25)")."""
    if isinstance(exc, TimeoutError):
        return "no answer (timed out)"
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno)
    return str(exc)


def relay_problem(relay: SmtpRelay, timeout: float = RELAY_PROBE_SECONDS) -> str | None:
    """Why the relay cannot be reached right now (a TCP connection tried and closed), or None when it
    answers. Blocking: for the start of a process, before its event loop runs."""
    try:
        socket.create_connection((relay.hostname, relay.port), timeout=timeout).close()
    except OSError as exc:
        return network_reason(exc)
    return None


# Awaited right before an email's first byte goes to the relay (the send worker's count of emails that
# a crash could leave sent twice, recorder.py); awaiting it again takes nothing more. None: nothing is
# counted (a test send, a form's confirmation).
Admit = Callable[[], Awaitable[None]] | None


class Transport(Protocol):
    async def send(
        self, sender: str, recipient: str, message: bytes, sending_domain: str = "", admit: Admit = None
    ) -> None:
        """`sending_domain`: the From address's domain, which may have a relay of its own; `admit`: see
        Admit."""

    async def close(self) -> None: ...


class MaildirTransport:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._box: mailbox.Maildir | None = None
        # The sends of a batch write from several threads at once; only one may create the folders
        # (two racing `Maildir(create=True)` calls fail with FileExistsError).
        self._opening = threading.Lock()

    def _write(self, message: bytes) -> None:
        with self._opening:
            if self._box is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)  # Maildir makes only its own folder
                self._box = mailbox.Maildir(self.path, create=True)
        # Maildir files use the local line ending; the message is built with CRLF for SMTP.
        self._box.add(message.replace(b"\r\n", b"\n"))

    async def send(
        self, sender: str, recipient: str, message: bytes, sending_domain: str = "", admit: Admit = None
    ) -> None:
        if admit is not None:
            await admit()
        try:
            await asyncio.to_thread(self._write, message)
        except OSError as exc:  # a full disk clears up; retry later
            raise TemporaryFailure(f"outbox: {exc}") from exc

    async def close(self) -> None:
        return None


class SmtpTransport:
    """A pool of at most `size` open SMTP connections to one relay, each sending one message at a time,
    at the relay's pace (pace.py): its cap, and its back-off after throttle replies, per receiving
    domain when it passes the receivers' replies through."""

    def __init__(
        self,
        relay: SmtpRelay | str,
        size: int,
        *,
        timeout: float = SMTP_TIMEOUT_SECONDS,
        local_name: str | None = None,
        throttle_window: float = THROTTLE_WINDOW_SECONDS,
    ) -> None:
        relay = SmtpRelay.from_url(relay) if isinstance(relay, str) else relay
        self.relay = relay
        self.hostname = relay.hostname
        self.implicit_tls = relay.implicit_tls
        self.port = relay.port
        self.starttls = relay.starttls
        self.username = relay.username
        self.password = relay.password
        self.verify_tls = relay.verify_tls
        self.size = max(1, size)
        self.timeout = timeout
        self._idle: list[SmtpConnection] = []
        self._slots = asyncio.Semaphore(self.size)
        # The tasks writing a held content alone (_settle_if_left).
        self._settling: set[asyncio.Task[None]] = set()
        self._tls_context: ssl.SSLContext | None = None
        # What EHLO says (TIDINGS_SMTP_HELO_NAME or the base URL's host); None: the machine's name.
        self._local_name: str | None = local_name
        # After a failed connect, sends fail fast until then instead of each trying (and waiting) again.
        self._down_until = 0.0
        self.throttle_window = throttle_window
        # The relay's own pace, and (passthrough relays) one a receiving domain, made as domains appear.
        self.pace = Pace(relay.rate, throttle_window)
        self.domain_paces: dict[str, Pace] = {}
        # For /metrics: refused connections, and refusals (4xx, 5xx) of emails.
        self.connect_failures = 0
        self.refusals = 0
        LIVE_TRANSPORTS.add(self)

    @property
    def down(self) -> bool:
        """Whether a connection failed a moment ago (sends fail fast until RECONNECT_PAUSE_SECONDS pass)."""
        return asyncio.get_running_loop().time() < self._down_until

    def _context(self) -> ssl.SSLContext:
        # Built once: loading the system's certificates costs milliseconds, too much per connection.
        if self._tls_context is None:
            context = ssl.create_default_context()
            if not self.verify_tls:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            self._tls_context = context
        return self._tls_context

    async def _connect(self) -> SmtpConnection:
        loop = asyncio.get_running_loop()
        if loop.time() < self._down_until:
            raise RelayUnreachable(f"smtp: {self.hostname}:{self.port} was unreachable a moment ago")
        if self._local_name is None:
            # What EHLO says; getfqdn may ask DNS, so once, and off the event loop.
            self._local_name = await asyncio.to_thread(socket.getfqdn)
        try:
            return await SmtpConnection.open(
                self.hostname,
                self.port,
                local_name=self._local_name,
                tls=self._context() if self.implicit_tls or self.starttls else None,
                implicit_tls=self.implicit_tls,
                username=self.username,
                password=self.password,
                timeout=self.timeout,
            )
        except (SmtpReplyError, SmtpUnsupported, SmtpProtocolError, OSError, TimeoutError) as exc:
            # A refused connection, greeting, STARTTLS or login: the relay, not this email, is the
            # problem. Every email waiting for it is retried later rather than failed for good.
            self._down_until = loop.time() + RECONNECT_PAUSE_SECONDS
            self.connect_failures += 1
            reason = network_reason(exc)
            raise RelayUnreachable(f"smtp: cannot connect to {self.hostname}:{self.port}: {reason}") from exc

    async def send(
        self, sender: str, recipient: str, message: bytes, sending_domain: str = "", admit: Admit = None
    ) -> None:
        for address in (sender, recipient):
            if not address or UNSAFE_ADDRESS.search(address):
                raise PermanentFailure(
                    f"smtp: {address!r} cannot be written in an SMTP envelope", bounce=False
                )
        loop = asyncio.get_running_loop()
        started = loop.time()
        pace = self.pace
        receiver = self._receiver_pace(recipient) if self.relay.passthrough else None
        if pace.limiting or (receiver is not None and receiver.limiting):
            started = await self._wait_turn(started, pace, receiver)
        try:
            await self._deliver(sender, recipient, message, admit)
        except Throttled as exc:
            now = loop.time()
            throttled = receiver or pace
            throttled.throttled(now, started)
            delay = throttled.defer(now) - now
            raise Deferred(f"{exc} (deferred {delay:.0f} s)", delay) from exc
        except RelayUnreachable:
            raise  # counted as a connection failure (_connect)
        except (TemporaryFailure, PermanentFailure):
            self.refusals += 1
            raise
        now = loop.time()
        pace.took(now)
        if receiver is not None:
            receiver.took(now)

    def _receiver_pace(self, recipient: str) -> Pace:
        domain = recipient.rpartition("@")[2].lower()
        receiver = self.domain_paces.get(domain)
        if receiver is None:
            receiver = self.domain_paces[domain] = Pace(None, self.throttle_window)
        return receiver

    async def _wait_turn(self, now: float, pace: Pace, receiver: Pace | None) -> float:
        """Wait for this email's turn at the relay's pace (a second at most) and take it, or raise
        Deferred with a later moment when the relay's turn is further off or the receiving domain's
        is not now: a lane that waited for one receiver would slow every other one."""
        relay_turn = pace.slot(now)
        receiver_turn = receiver.slot(now) if receiver is not None else now
        if receiver is not None and receiver_turn > now:
            delay = receiver.defer(now) - now
            raise Deferred(f"smtp: {self.hostname}:{self.port} paced for the receiving domain", delay)
        if relay_turn > now + MAX_PACE_WAIT_SECONDS:
            delay = pace.defer(now) - now
            raise Deferred(f"smtp: {self.hostname}:{self.port} at its pace", delay)
        pace.take(relay_turn)
        if receiver is not None:
            receiver.take(relay_turn)
        if relay_turn > now:
            await asyncio.sleep(relay_turn - now)
        return relay_turn

    async def _deliver(self, sender: str, recipient: str, message: bytes, admit: Admit) -> None:
        # Whether this email already went out again after its held content was lost unwritten: once
        # only, so that a relay dropping every connection after DATA cannot keep it going round.
        held_again = False
        while True:
            async with self._slots:
                connection = self._idle_connection()
                reused = connection is not None
                if connection is None:
                    connection = await self._connect()
                try:
                    if admit is not None:
                        # Under the slot, after the connection: an email waiting for either, or on a
                        # relay that refuses connections, holds no place.
                        await admit()
                    held = await connection.start(sender, recipient, message)
                except SmtpReplyError as exc:
                    self._keep(connection)
                    raise _failure(exc.code, exc.text, about_recipient=exc.stage != "mail") from exc
                except SmtpUnsupported as exc:
                    # Refused before its commands went out: the content held from the email before,
                    # which they were to follow, goes out now (its sender left it to this email, _settle).
                    await self._write_held(connection)
                    self._keep(connection)
                    raise PermanentFailure(f"smtp: {exc}", bounce=False) from exc
                except (OSError, TimeoutError, SmtpProtocolError) as exc:
                    connection.abort()
                    if reused and not connection.content_sent:
                        # A pooled connection the server had dropped meanwhile: nothing of this email
                        # reached it, so it goes out on a fresh connection at once.
                        continue
                    raise TemporaryFailure(f"smtp: {exc}") from exc
                except BaseException:
                    connection.abort()  # cancelled mid-dialogue: the connection's state is unknown
                    raise
                self._keep(connection)
            if held is None:
                return  # a server without PIPELINING: the whole dialogue is done
            try:
                code, text = await self._settle(connection, held)
            except (OSError, TimeoutError, SmtpProtocolError) as exc:
                if not held.written and not held_again:
                    held_again = True
                    continue  # the connection was lost before the content went out: another one takes it
                raise TemporaryFailure(f"smtp: {exc}") from exc
            if code != 250:
                raise _failure(code, text, about_recipient=True)
            return

    async def _settle(self, connection: SmtpConnection, held: HeldContent) -> tuple[int, str]:
        """The answer to an email's held content. The connection went back to the pool with it, and the
        slot was freed: an email waiting for a slot (there usually is one while a campaign goes out)
        takes this connection next (the idle list is last in, first out) and writes the content ahead of
        its own commands, or loses it with the connection. When none took it two turns of the loop later
        (_settle_if_left), the content goes out alone, under a slot like any other use of a connection.

        Two turns: the waiter this email woke runs in the next one, but when several emails give their
        connections back in one turn, the first waiter takes the last connection given back (the idle
        list is last in, first out) and the first email's connection waits for a later waiter of that
        same turn; looked at after one turn (the `sleep(0)` this was), four emails in ten found theirs
        still idle and waited for a slot to write their content alone, only to find it taken by then;
        after two, three in a hundred, nearly all at the end of a batch, when no email waits. A callback
        rather than a `sleep(0)`: the email's coroutines were resumed once more an email only to look."""
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._settle_if_left, connection, held)
        return await held.reply

    def _settle_if_left(self, connection: SmtpConnection, held: HeldContent) -> None:
        """Called two turns of the loop after `held` went back to the pool with its connection, after
        the emails that slots freed then woke: when none took the connection, the content goes out
        alone."""
        if connection.held is held and connection in self._idle:
            task = asyncio.get_running_loop().create_task(self._settle_alone(connection, held))
            self._settling.add(task)  # a reference until it is done (the loop keeps only a weak one)
            task.add_done_callback(self._settling.discard)

    async def _settle_alone(self, connection: SmtpConnection, held: HeldContent) -> None:
        async with self._slots:
            # Another email may have taken the connection while this one waited for a slot.
            if connection.held is held and connection in self._idle:
                self._idle.remove(connection)
                try:
                    await self._write_held(connection)
                finally:
                    self._keep(connection)

    async def _write_held(self, connection: SmtpConnection) -> None:
        """The content held on `connection`, written alone under a slot; its email gets the answer, or
        the error that lost it, through its HeldContent."""
        held = connection.held
        if held is None:
            return
        try:
            await connection.settle(held)
        except Exception:
            connection.abort()
        except BaseException:
            connection.abort()
            raise

    def _idle_connection(self) -> SmtpConnection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable:
                return connection
            connection.abort()  # closed by the server while idle
        return None

    def _keep(self, connection: SmtpConnection) -> None:
        if connection.usable:
            self._idle.append(connection)
        else:
            connection.abort()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        await asyncio.gather(*(connection.quit() for connection in idle), return_exceptions=True)


class RelayRouter:
    """Several relays (TIDINGS_SMTP_URL with more than one): an email goes to a relay of its sending
    domain's (those naming it in `domains=`), else to one of the relays without `domains=`, chosen at
    random by weight among those that are up; when that relay refuses the connection, the next one of
    the same group takes the email at once (failover)."""

    def __init__(self, relays: list[SmtpTransport]) -> None:
        self.relays = relays
        self.general = [relay for relay in relays if not relay.relay.domains]
        self.by_domain: dict[str, list[SmtpTransport]] = {}
        for relay in relays:
            for domain in relay.relay.domains:
                self.by_domain.setdefault(domain, []).append(relay)

    def candidates(self, sending_domain: str) -> list[SmtpTransport]:
        """The relays to try, in order: one drawn by weight first (among those up), then the others."""
        group = self.by_domain.get(sending_domain.lower()) or self.general
        if len(group) == 1:
            return group
        up = [relay for relay in group if not relay.down] or group
        first = random.choices(up, weights=[relay.relay.weight for relay in up])[0]
        rest = sorted((r for r in group if r is not first), key=lambda r: (r.down, -r.relay.weight))
        return [first, *rest]

    async def send(
        self, sender: str, recipient: str, message: bytes, sending_domain: str = "", admit: Admit = None
    ) -> None:
        failure: RelayUnreachable | None = None
        for relay in self.candidates(sending_domain):
            try:
                await relay.send(sender, recipient, message, sending_domain, admit)
            except RelayUnreachable as exc:
                failure = exc
                continue
            return
        if failure is None:  # every group has a relay (the settings check refuses one without)
            raise TemporaryFailure(f"smtp: no relay for {sending_domain}")
        raise failure

    async def close(self) -> None:
        await asyncio.gather(*(relay.close() for relay in self.relays))


def _failure(code: int, text: str, *, about_recipient: bool) -> Exception:
    """What a refusal means. A throttle reply (pace.py) defers the email. A 5xx to RCPT or DATA (one
    recipient a transaction) is classified as a bounce is (bounce_classes.py): a dead address bounces,
    a refused sender is blocked, a full mailbox (5.2.2) is tried again; a refused MAIL FROM is about the
    sender alone and fails the email."""
    message = f"{code} {text}".strip()
    if 400 <= code < 500:
        return Throttled(message) if is_throttle(code, text) else TemporaryFailure(message)
    if not about_recipient:
        return PermanentFailure(message, bounce=False)
    kind = classify(message)
    if kind == "soft":
        return TemporaryFailure(message)
    return PermanentFailure(message, bounce=kind == "hard", blocked=kind == "blocked")


def make_transport(
    smtp_url: str,
    outbox: Path,
    size: int,
    local_name: str | None = None,
    throttle_window: float = THROTTLE_WINDOW_SECONDS,
) -> Transport:
    """The Maildir without a URL, one relay's pool, or a router over several (each its own pool)."""
    if not smtp_url:
        return MaildirTransport(outbox)
    pools = [
        SmtpTransport(relay, size, local_name=local_name, throttle_window=throttle_window)
        for relay in parse_relays(smtp_url)
    ]
    return pools[0] if len(pools) == 1 else RelayRouter(pools)


def describe_transport(transport: Transport) -> str:
    """Where mail goes, for the log (never the relay's credentials)."""
    if isinstance(transport, RelayRouter):
        return "the SMTP relays " + ", ".join(_describe_relay(relay) for relay in transport.relays)
    if isinstance(transport, SmtpTransport):
        return f"the SMTP relay {_describe_relay(transport)}"
    if isinstance(transport, MaildirTransport):
        return f"the Maildir {transport.path.resolve()} (TIDINGS_SMTP_URL is not set)"
    return type(transport).__name__


def _describe_relay(transport: SmtpTransport) -> str:
    security = "no TLS"
    if transport.implicit_tls or transport.starttls:
        security = "implicit TLS" if transport.implicit_tls else "STARTTLS"
    details = [security]
    relay = transport.relay
    if relay.weight != 1:
        details.append(f"weight {relay.weight:g}")
    if relay.domains:
        details.append("for " + ", ".join(relay.domains))
    if relay.rate is not None:
        details.append(f"at most {relay.rate:g}/s")
    return f"{relay.name} ({'; '.join(details)})"


# The relays of this process, for /metrics (a transport lives as long as its process's jobs).
LIVE_TRANSPORTS: weakref.WeakSet[SmtpTransport] = weakref.WeakSet()


class RelayMetrics(Collector):
    """Each relay's emails, errors and back-off, read from the live transports when scraped (nothing is
    counted through prometheus_client on the send path)."""

    def collect(self) -> Iterable[CounterMetricFamily | GaugeMetricFamily]:
        accepted = CounterMetricFamily("tidings_relay_emails", "Emails a relay accepted", labels=["relay"])
        errors = CounterMetricFamily(
            "tidings_relay_errors", "Refused connections and emails, by relay", labels=["relay", "kind"]
        )
        throttles = CounterMetricFamily(
            "tidings_relay_throttles",
            "Throttle replies (slow down), by relay and receiving domain ('' : the relay's own)",
            labels=["relay", "domain"],
        )
        deferred = CounterMetricFamily(
            "tidings_relay_deferred", "Emails deferred by a relay's pace", labels=["relay", "domain"]
        )
        rate = GaugeMetricFamily(
            "tidings_relay_pace_per_second",
            "Emails a second a relay (or a receiving domain through it) is sent now; absent: no limit",
            labels=["relay", "domain"],
        )
        paused = GaugeMetricFamily(
            "tidings_relay_paused_seconds", "Seconds a throttled pace pauses yet", labels=["relay", "domain"]
        )
        for transport in list(LIVE_TRANSPORTS):
            name = transport.relay.name
            accepted.add_metric([name], transport.pace.accepted)
            errors.add_metric([name, "connect"], transport.connect_failures)
            errors.add_metric([name, "refused"], transport.refusals)
            # The event loop's clock is the monotonic one (asyncio's loops and uvloop alike); the
            # scrape may run in a thread of its own (tidings worker's metrics server).
            now = time.monotonic()
            for domain, pace in [("", transport.pace), *transport.domain_paces.items()]:
                if pace.throttles or pace.deferred:
                    throttles.add_metric([name, domain], pace.throttles)
                    deferred.add_metric([name, domain], pace.deferred)
                if pace.rate is not None:
                    rate.add_metric([name, domain], pace.rate)
                if pace.paused_until > now:
                    paused.add_metric([name, domain], pace.paused_until - now)
        yield from (accepted, errors, throttles, deferred, rate, paused)


REGISTRY.register(RelayMetrics())
