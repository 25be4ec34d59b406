"""Where rendered emails go: an SMTP relay over a pool of reused connections, or a Maildir on disk.

`TIDINGS_SMTP_URL` picks the relay: `smtp://user:pass@host:587?starttls=1` or `smtps://host:465`
(implicit TLS). Left empty, every email is written to the Maildir `./var/outbox`, so the embedded
set-up sends with no mail server at all.

A send either returns, or raises `TemporaryFailure` (an SMTP 4xx, a dropped connection, a timeout: try
again later) or `PermanentFailure` (an SMTP 5xx: this recipient fails, the rest of the campaign goes on).
"""

from __future__ import annotations

import asyncio
import mailbox
import os
import re
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from app.mail.bounces.bounce_classes import classify
from app.mail.sending.smtp import (
    SMTP_TIMEOUT_SECONDS,
    SmtpConnection,
    SmtpProtocolError,
    SmtpReplyError,
    SmtpUnsupported,
)

RECONNECT_PAUSE_SECONDS = 5.0
# How long the check at start waits for the relay to take a connection.
RELAY_PROBE_SECONDS = 3.0
TRUE_WORDS = {"1", "true", "yes", "on"}
# Control characters, angle brackets and spaces cannot be in an envelope address (command injection).
UNSAFE_ADDRESS = re.compile(r"[\x00-\x20\x7f<>]")


class TemporaryFailure(Exception):
    """Worth another try later (4xx, network trouble)."""


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
        return cls(
            hostname=parts.hostname,
            port=port or (465 if implicit_tls else 25),
            implicit_tls=implicit_tls,
            starttls=query.get("starttls", "").lower() in TRUE_WORDS,
            verify_tls=query.get("verify", "1").lower() in TRUE_WORDS,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )


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


class Transport(Protocol):
    async def send(self, sender: str, recipient: str, message: bytes) -> None: ...

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

    async def send(self, sender: str, recipient: str, message: bytes) -> None:
        try:
            await asyncio.to_thread(self._write, message)
        except OSError as exc:  # a full disk clears up; retry later
            raise TemporaryFailure(f"outbox: {exc}") from exc

    async def close(self) -> None:
        return None


class SmtpTransport:
    """A pool of at most `size` open SMTP connections, each sending one message at a time."""

    def __init__(
        self, url: str, size: int, *, timeout: float = SMTP_TIMEOUT_SECONDS, local_name: str | None = None
    ) -> None:
        relay = SmtpRelay.from_url(url)
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
        self._tls_context: ssl.SSLContext | None = None
        # What EHLO says (TIDINGS_SMTP_HELO_NAME or the base URL's host); None: the machine's name.
        self._local_name: str | None = local_name
        # After a failed connect, sends fail fast until then instead of each trying (and waiting) again.
        self._down_until = 0.0

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
            raise TemporaryFailure(f"smtp: {self.hostname}:{self.port} was unreachable a moment ago")
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
            reason = network_reason(exc)
            raise TemporaryFailure(f"smtp: cannot connect to {self.hostname}:{self.port}: {reason}") from exc

    async def send(self, sender: str, recipient: str, message: bytes) -> None:
        for address in (sender, recipient):
            if not address or UNSAFE_ADDRESS.search(address):
                raise PermanentFailure(
                    f"smtp: {address!r} cannot be written in an SMTP envelope", bounce=False
                )
        async with self._slots:
            while True:
                connection = self._idle_connection()
                reused = connection is not None
                if connection is None:
                    connection = await self._connect()
                try:
                    await connection.send(sender, recipient, message)
                except SmtpReplyError as exc:
                    self._keep(connection)
                    raise _failure(exc.code, exc.text, about_recipient=exc.stage != "mail") from exc
                except SmtpUnsupported as exc:
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
                return

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


def _failure(code: int, text: str, *, about_recipient: bool) -> Exception:
    """What a refusal means. A 5xx to RCPT or DATA (one recipient a transaction) is classified as a
    bounce is (bounce_classes.py): a dead address bounces, a refused sender is blocked, a full mailbox
    (5.2.2) is tried again; a refused MAIL FROM is about the sender alone and fails the email."""
    message = f"{code} {text}".strip()
    if 400 <= code < 500:
        return TemporaryFailure(message)
    if not about_recipient:
        return PermanentFailure(message, bounce=False)
    kind = classify(message)
    if kind == "soft":
        return TemporaryFailure(message)
    return PermanentFailure(message, bounce=kind == "hard", blocked=kind == "blocked")


def make_transport(smtp_url: str, outbox: Path, size: int, local_name: str | None = None) -> Transport:
    if smtp_url:
        return SmtpTransport(smtp_url, size, local_name=local_name)
    return MaildirTransport(outbox)


def describe_transport(transport: Transport) -> str:
    """Where mail goes, for the log (never the relay's credentials)."""
    if isinstance(transport, SmtpTransport):
        security = "no TLS"
        if transport.implicit_tls or transport.starttls:
            security = "implicit TLS" if transport.implicit_tls else "STARTTLS"
        return f"the SMTP relay {transport.hostname}:{transport.port} ({security})"
    if isinstance(transport, MaildirTransport):
        return f"the Maildir {transport.path.resolve()} (TIDINGS_SMTP_URL is not set)"
    return type(transport).__name__
