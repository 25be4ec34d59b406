"""One SMTP client connection, lean enough for the send path: ESMTP, PIPELINING, STARTTLS, AUTH PLAIN/LOGIN.

Why not aiosmtplib: it waits for each command's reply before writing the next (four round trips and a
dozen awaits an email), wraps every wait in `wait_for`, and scans each message twice for line endings;
profiled under `tidings worker`, it cost more than rendering the email. Here, when the server offers
PIPELINING (RFC 2920; Postfix, Exim and the hosted relays do), an email's MAIL, RCPT and DATA go in
one write, and its content is held back once DATA is accepted: the next email on the same connection
writes it ahead of its own commands (RFC 2920 3.1 lets the content start a group), so a busy connection
makes one write and one round trip an email instead of two, and the server answers the content and the
next commands in one packet. When no email follows at once, the content goes out alone (`settle`).
Without PIPELINING, commands go one by one. The pool, and what a reply means for the email (retry, fail,
bounce), live in transport.py.
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
from collections import deque
from typing import cast

SMTP_TIMEOUT_SECONDS = 30
QUIT_TIMEOUT_SECONDS = 5
# A reply longer than this is not SMTP (RFC 5321 replies are short; EHLO lists fit in a few hundred bytes).
MAX_REPLY_BYTES = 64 * 1024
LINE_ENDINGS = re.compile(rb"\r\n|\r|\n")
# A line of content starting with "." gets another one (RFC 5321 4.5.2), so it cannot end the DATA.
DOT_AT_LINE_START = re.compile(rb"^\.", re.MULTILINE)
CRLF = b"\r\n"


class WireMessage(bytes):
    """Message bytes already as DATA wants them: CRLF line endings only, no line starting with ".".

    What render.py makes is; saying so spares the send path from scanning each 10 KB email for
    stray line endings and dots, which cost as much as the SMTP dialogue itself."""


class SmtpReplyError(Exception):
    """The server answered a command with a code other than the one that lets the email go on."""

    def __init__(self, code: int, text: str, stage: str) -> None:
        super().__init__(f"{code} {text} (at {stage})")
        self.code = code
        self.text = text
        # "greeting", "ehlo", "starttls", "auth", "mail", "rcpt" or "data"
        self.stage = stage


class SmtpProtocolError(Exception):
    """The server said something that is not SMTP, or too much of it: the connection is unusable."""


class SmtpUnsupported(Exception):
    """The server lacks an extension needed here (STARTTLS asked for, SMTPUTF8, an AUTH method)."""


class _Replies(asyncio.Protocol):
    """Reads the byte stream into whole replies (code, text), queued until the connection asks for them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.lines: list[str] = []
        self.replies: deque[tuple[int, str]] = deque()
        self.wanted = 0
        self.waiter: asyncio.Future[None] | None = None
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though not always a subclass of asyncio.Transport: uvloop's (what
        # `tidings serve` runs on under uvicorn) are its own classes with the same methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[start:end]).rstrip(b"\r")
            start = end + 1
            code = line[:3]
            if not (code.isdigit() and len(code) == 3) or line[3:4] not in (b"", b" ", b"-"):
                self._fail(SmtpProtocolError(f"not an SMTP reply: {line[:80]!r}"))
                return
            self.lines.append(line[4:].decode("utf-8", "replace"))
            if line[3:4] != b"-":
                self.replies.append((int(code), "\n".join(self.lines)))
                self.lines = []
        del buffer[:start]
        if len(buffer) > MAX_REPLY_BYTES or len(self.lines) > 1000:
            self._fail(SmtpProtocolError("reply too long"))
            return
        waiter = self.waiter
        if waiter is not None and len(self.replies) >= self.wanted and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: Exception) -> None:
        self.lost = error
        if self.transport is not None:
            self.transport.abort()
        self._wake()

    def eof_received(self) -> bool | None:
        return False  # the server closed its side: close ours too (connection_lost follows)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.lost is None:
            self.lost = exc or ConnectionResetError("the server closed the connection")
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read(self, count: int, timeout: float | None) -> list[tuple[int, str]]:
        """The next `count` replies, waiting up to `timeout` seconds for them all (None: the caller
        keeps its own deadline, see `expire`)."""
        if len(self.replies) < count:
            if self.lost is not None:
                raise self.lost
            self.wanted = count
            waiter = self.loop.create_future()
            self.waiter = waiter
            timer = self.loop.call_later(timeout, self.expire) if timeout is not None else None
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
                self.waiter = None
            if len(self.replies) < count:
                raise self.lost or ConnectionResetError("the server closed the connection")
        return [self.replies.popleft() for _ in range(count)]

    def expire(self) -> None:
        """Out of time: the connection is given up, and whoever waits on it gets a TimeoutError."""
        if self.lost is None:
            self.lost = TimeoutError("the SMTP server did not answer in time")
        if self.transport is not None:
            self.transport.abort()
        self._wake()


class HeldContent:
    """An email whose MAIL, RCPT and DATA the server accepted, its content not yet written (see the module's
    docstring): `reply` gets the server's answer to the content, or the error that lost it."""

    __slots__ = ("content", "reply", "written")

    def __init__(self, content: bytes, reply: asyncio.Future[tuple[int, str]]) -> None:
        self.content = content
        self.reply = reply
        # Whether the content was written: after that, a lost connection may or may not have delivered it;
        # before, the email can go out on another connection.
        self.written = False

    def answered(self, answer: tuple[int, str]) -> None:
        # Not when its email was cancelled while it waited (the process is stopping).
        if not self.reply.done():
            self.reply.set_result(answer)

    def lost(self, error: BaseException) -> None:
        if not self.reply.done():
            if not isinstance(error, Exception):
                error = ConnectionResetError("the connection was given up")
            self.reply.set_exception(error)
            self.reply.exception()  # retrieved here: its owner may be gone (cancelled) and not read it


class SmtpConnection:
    """An open, greeted (and, as configured, encrypted and logged-in) connection; one email at a time,
    but for the content held back from the email before (HeldContent)."""

    def __init__(self, transport: asyncio.Transport, replies: _Replies, timeout: float) -> None:
        self.transport = transport
        self.replies = replies
        self.timeout = timeout
        self.extensions: dict[str, str] = {}
        # False once the server said 421 (it is closing) or the dialogue went wrong.
        self._usable = True
        # Whether any of the current email's content was written: after that, a lost connection may
        # or may not have delivered it.
        self.content_sent = False
        # The content of the email before, accepted for DATA and not yet written (pipelining only).
        self.held: HeldContent | None = None

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        local_name: str,
        tls: ssl.SSLContext | None = None,
        implicit_tls: bool = False,
        username: str | None = None,
        password: str | None = None,
        timeout: float = SMTP_TIMEOUT_SECONDS,
    ) -> SmtpConnection:
        loop = asyncio.get_running_loop()
        replies = _Replies(loop)
        transport, _ = await asyncio.wait_for(
            loop.create_connection(
                lambda: replies,
                host,
                port,
                ssl=tls if implicit_tls else None,
                server_hostname=host if implicit_tls and tls is not None else None,
            ),
            timeout,
        )
        connection = cls(transport, replies, timeout)
        try:
            await connection._expect(220, "greeting")
            await connection._ehlo(local_name)
            if tls is not None and not implicit_tls:
                if "starttls" not in connection.extensions:
                    raise SmtpUnsupported("the server does not offer STARTTLS")
                connection._write(b"STARTTLS\r\n")
                await connection._expect(220, "starttls")
                upgraded = await asyncio.wait_for(
                    loop.start_tls(transport, replies, tls, server_hostname=host), timeout
                )
                if upgraded is None:
                    raise SmtpProtocolError("STARTTLS failed")
                connection.transport = replies.transport = upgraded
                await connection._ehlo(local_name)
            if username is not None:
                await connection._login(username, password or "")
        except BaseException:
            connection.abort()
            raise
        return connection

    @property
    def usable(self) -> bool:
        return (
            self._usable
            and self.replies.lost is None
            and not self.transport.is_closing()
            and not self.replies.replies
        )

    @property
    def pipelining(self) -> bool:
        return "pipelining" in self.extensions

    def _write(self, data: bytes) -> None:
        if self.replies.lost is not None:
            raise self.replies.lost
        self.transport.write(data)

    async def _read(self, count: int, *, timed: bool = True) -> list[tuple[int, str]]:
        """The next replies, each within the timeout (untimed: under the email's timer, see send)."""
        found = await self.replies.read(count, self.timeout if timed else None)
        if any(code == 421 for code, _ in found):
            self._usable = False  # "service not available, closing transmission channel"
        return found

    async def _expect(self, code: int, stage: str) -> str:
        [(got, text)] = await self._read(1)
        if got != code:
            raise SmtpReplyError(got, text, stage)
        return text

    async def _ehlo(self, local_name: str) -> None:
        self._write(f"EHLO {local_name}\r\n".encode("idna" if not local_name.isascii() else "ascii"))
        [(code, text)] = await self._read(1)
        if code == 250:
            extensions: dict[str, str] = {}
            for line in text.split("\n")[1:]:
                keyword, _, params = line.strip().partition(" ")
                keyword = keyword.lower()
                if keyword.startswith("auth="):  # the pre-RFC 4954 spelling some servers still send
                    keyword, params = "auth", f"{keyword[5:]} {params}"
                if keyword == "auth":
                    params = f"{extensions.get('auth', '')} {params}".strip()
                extensions[keyword] = params
            self.extensions = extensions
            return
        # An SMTP-only server: plain HELO, no extensions.
        self._write(f"HELO {local_name}\r\n".encode("ascii", "replace"))
        await self._expect(250, "helo")
        self.extensions = {}

    async def _login(self, username: str, password: str) -> None:
        methods = self.extensions.get("auth", "").upper().split()
        if "PLAIN" in methods:
            secret = base64.b64encode(f"\0{username}\0{password}".encode()).decode("ascii")
            self._write(f"AUTH PLAIN {secret}\r\n".encode("ascii"))
            await self._expect(235, "auth")
        elif "LOGIN" in methods:
            self._write(b"AUTH LOGIN\r\n")
            await self._expect(334, "auth")
            self._write(base64.b64encode(username.encode()) + CRLF)
            await self._expect(334, "auth")
            self._write(base64.b64encode(password.encode()) + CRLF)
            await self._expect(235, "auth")
        else:
            raise SmtpUnsupported(f"the server offers no AUTH PLAIN or LOGIN (offers: {methods or 'none'})")

    async def start(self, sender: str, recipient: str, message: bytes) -> HeldContent | None:
        """One email to one recipient. With PIPELINING, its MAIL, RCPT and DATA (after the content held
        from the email before, whose answer goes to its HeldContent), and its own content held back: the
        next `start` on this connection or `settle` writes it. Without, the whole dialogue, and None.

        Raises SmtpReplyError on a refusal (the connection stays good), SmtpUnsupported when the email
        needs SMTPUTF8 the server lacks, and OSError, TimeoutError or SmtpProtocolError when the
        connection broke (`content_sent` says whether this email's content may have arrived).

        The dialogue has `timeout` seconds a round trip it needs, kept by one timer an email rather than
        one a reply (timers were a tenth of the send path's cost)."""
        round_trips = 1 if self.pipelining else 4
        timer = self.replies.loop.call_later(self.timeout * round_trips, self.replies.expire)
        try:
            return await self._start(sender, recipient, message)
        finally:
            timer.cancel()

    async def settle(self, held: HeldContent) -> tuple[int, str]:
        """Write the held content alone (no email followed it on this connection) and wait for its answer."""
        if self.held is held:
            timer = self.replies.loop.call_later(self.timeout, self.replies.expire)
            try:
                self.held = None
                self._write(held.content)
                held.written = True
                [answer] = await self._read(1, timed=False)
                held.answered(answer)
            except BaseException as exc:
                held.lost(exc)
                raise
            finally:
                timer.cancel()
        return await held.reply

    async def _start(self, sender: str, recipient: str, message: bytes) -> HeldContent | None:
        self.content_sent = False
        if self.replies.replies:
            raise SmtpProtocolError("the server sent a reply nobody asked for")
        utf8 = not (sender.isascii() and recipient.isascii())
        if utf8 and "smtputf8" not in self.extensions:
            raise SmtpUnsupported("the server does not take non-ASCII addresses (no SMTPUTF8)")
        content = _content(message)
        mail = f"MAIL FROM:<{sender}>"
        if "size" in self.extensions:
            mail += f" SIZE={len(content) - 3}"
        if utf8:
            mail += " SMTPUTF8"
        commands = [mail, f"RCPT TO:<{recipient}>", "DATA"]
        encoding = "utf-8" if utf8 else "ascii"
        if self.pipelining:
            answers = await self._pipelined("\r\n".join([*commands, ""]).encode(encoding))
        else:
            answers = []
            for command in commands:
                self._write(f"{command}\r\n".encode(encoding))
                answers += await self._read(1, timed=False)
                if answers[-1][0] >= 400:
                    break
        for (code, text), stage, good in zip(
            answers, ("mail", "rcpt", "data"), (250, 250, 354), strict=False
        ):
            if code != good and not (stage == "rcpt" and code == 251):
                try:
                    await self._abandon(answers)
                except (OSError, TimeoutError, SmtpProtocolError):
                    self.abort()  # the refusal is what matters for the email; this connection is done
                raise SmtpReplyError(code, text, stage)
        if self.pipelining:
            self.held = HeldContent(content, self.replies.loop.create_future())
            return self.held
        self.content_sent = True
        self._write(content)
        [(code, text)] = await self._read(1, timed=False)
        if code != 250:
            raise SmtpReplyError(code, text, "data")
        return None

    async def _pipelined(self, commands: bytes) -> list[tuple[int, str]]:
        """Write `commands` after the content held from the email before, if any, and read their three
        answers, handing the content's answer to its HeldContent first."""
        held, self.held = self.held, None
        if held is None:
            self._write(commands)
            return await self._read(3, timed=False)
        try:
            self._write(held.content + commands)
            held.written = True
            answers = await self._read(4, timed=False)
        except BaseException as exc:
            if self.replies.replies:
                # The content's answer came before the connection broke (a relay that closes after a
                # message, say): that email is settled; only this one's commands were lost.
                held.answered(self.replies.replies.popleft())
            held.lost(exc)
            raise
        held.answered(answers[0])
        return answers[1:]

    async def _abandon(self, answers: list[tuple[int, str]]) -> None:
        """After a refused MAIL, RCPT or DATA, leave the server ready for the next email."""
        if len(answers) == 3 and answers[2][0] == 354:
            # DATA was accepted although MAIL or RCPT was not (pipelined): end it, empty.
            self.content_sent = True
            self._write(b".\r\n")
            await self._read(1, timed=False)
        if self._usable:
            self._write(b"RSET\r\n")
            await self._read(1, timed=False)

    async def quit(self) -> None:
        try:
            if self.held is not None:
                await self.settle(self.held)
            if self.usable:
                self._write(b"QUIT\r\n")
                await self.replies.read(1, QUIT_TIMEOUT_SECONDS)
        finally:
            self.abort()

    def abort(self) -> None:
        self._usable = False
        if self.held is not None:
            held, self.held = self.held, None
            held.lost(ConnectionResetError("the connection was given up before the content was written"))
        if not self.transport.is_closing():
            self.transport.abort()


def _content(message: bytes) -> bytes:
    """The DATA content: CRLF line endings, leading dots doubled, ending in CRLF "." CRLF.

    Rendered emails (WireMessage) need neither fix; others are checked, and rewritten only if needed.
    """
    if isinstance(message, WireMessage):
        return message + b".\r\n"
    crlf = message.count(CRLF)
    if message.count(b"\n") != crlf or message.count(b"\r") != crlf:
        message = LINE_ENDINGS.sub(CRLF, message)
    if message.startswith(b".") or b"\n." in message:
        message = DOT_AT_LINE_START.sub(b"..", message)
    if not message.endswith(CRLF):
        message += CRLF
    return message + b".\r\n"
