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
import ssl
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit

import aiosmtplib

SMTP_TIMEOUT_SECONDS = 30
RECONNECT_PAUSE_SECONDS = 5.0
TRUE_WORDS = {"1", "true", "yes", "on"}


class TemporaryFailure(Exception):
    """Worth another try later (4xx, network trouble)."""


class PermanentFailure(Exception):
    """Refused for good (5xx). `bounce` is set when the server refused the recipient's address."""

    def __init__(self, message: str, *, bounce: bool) -> None:
        super().__init__(message)
        self.bounce = bounce


class Transport(Protocol):
    async def send(self, sender: str, recipient: str, message: bytes) -> None: ...

    async def close(self) -> None: ...


class MaildirTransport:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._box: mailbox.Maildir | None = None

    def _write(self, message: bytes) -> None:
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

    def __init__(self, url: str, size: int) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ValueError("TIDINGS_SMTP_URL must look like smtp://user:pass@host:port or smtps://...")
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        self.hostname = parts.hostname
        self.implicit_tls = parts.scheme == "smtps"
        self.port = parts.port or (465 if self.implicit_tls else 25)
        self.starttls = query.get("starttls", "").lower() in TRUE_WORDS
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        self.verify_tls = query.get("verify", "1").lower() in TRUE_WORDS
        self.size = max(1, size)
        self._idle: asyncio.LifoQueue[aiosmtplib.SMTP] = asyncio.LifoQueue()
        self._slots = asyncio.Semaphore(self.size)
        self._tls_context: ssl.SSLContext | None = None
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

    async def _connect(self) -> aiosmtplib.SMTP:
        loop = asyncio.get_running_loop()
        if loop.time() < self._down_until:
            raise TemporaryFailure(f"smtp: {self.hostname}:{self.port} was unreachable a moment ago")
        client = aiosmtplib.SMTP(
            hostname=self.hostname,
            port=self.port,
            use_tls=self.implicit_tls,
            start_tls=self.starttls if not self.implicit_tls else False,
            tls_context=self._context(),
            timeout=SMTP_TIMEOUT_SECONDS,
        )
        try:
            await client.connect()
        except (aiosmtplib.SMTPException, OSError, TimeoutError):
            self._down_until = loop.time() + RECONNECT_PAUSE_SECONDS
            raise
        if self.username is not None:
            await client.login(self.username, self.password or "")
        return client

    async def send(self, sender: str, recipient: str, message: bytes) -> None:
        async with self._slots:
            client = self._idle.get_nowait() if not self._idle.empty() else None
            try:
                if client is None or not client.is_connected:
                    client = await self._connect()
                options = ["SMTPUTF8"] if not (sender.isascii() and recipient.isascii()) else []
                await client.sendmail(sender, [recipient], message, mail_options=options)
            except aiosmtplib.SMTPRecipientsRefused as exc:
                self._keep(client)
                refusal = exc.recipients[0] if exc.recipients else None
                code = refusal.code if refusal is not None else 550
                text = refusal.message if refusal is not None else str(exc)
                raise _failure(code, text, bounce=True) from exc
            except aiosmtplib.SMTPResponseException as exc:
                self._keep(client)
                raise _failure(exc.code, exc.message, bounce=False) from exc
            except TemporaryFailure:
                raise
            except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
                await _discard(client)
                raise TemporaryFailure(f"smtp: {exc}") from exc
            self._keep(client)

    def _keep(self, client: aiosmtplib.SMTP | None) -> None:
        if client is not None and client.is_connected:
            self._idle.put_nowait(client)

    async def close(self) -> None:
        while not self._idle.empty():
            client = self._idle.get_nowait()
            try:
                await client.quit()
            except (aiosmtplib.SMTPException, OSError, TimeoutError):
                client.close()


def _failure(code: int, text: str, *, bounce: bool) -> Exception:
    message = f"{code} {text}".strip()
    if 400 <= code < 500:
        return TemporaryFailure(message)
    return PermanentFailure(message, bounce=bounce)


async def _discard(client: aiosmtplib.SMTP | None) -> None:
    if client is not None:
        client.close()


def make_transport(smtp_url: str, outbox: Path, size: int) -> Transport:
    if smtp_url:
        return SmtpTransport(smtp_url, size)
    return MaildirTransport(outbox)
