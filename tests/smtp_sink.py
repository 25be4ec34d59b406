"""A real SMTP server on loopback (aiosmtpd) that records what it receives and can refuse recipients."""

from __future__ import annotations

import asyncio
import email
import email.policy
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SMTPProtocol
from aiosmtpd.smtp import Envelope, Session


@dataclass
class Received:
    sender: str
    recipients: list[str]
    data: bytes

    @property
    def message(self) -> EmailMessage:
        parsed = email.message_from_bytes(self.data, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        return parsed

    def part(self, subtype: str) -> str:
        body = self.message.get_body(preferencelist=(subtype,))
        assert body is not None, f"no text/{subtype} part"
        content = body.get_content()
        assert isinstance(content, str)
        return content


@dataclass
class SmtpSink:
    """What the loopback SMTP server received, and how it should answer given recipients."""

    host: str
    port: int
    received: list[Received] = field(default_factory=list)
    # recipient address -> "451 ..." or "550 ..." to answer at RCPT TO (temporary or permanent).
    refuse: dict[str, str] = field(default_factory=dict)
    # sender address -> answer at MAIL FROM; recipient address -> answer after the message's content.
    refuse_mail: dict[str, str] = field(default_factory=dict)
    refuse_data: dict[str, str] = field(default_factory=dict)
    # Offer PIPELINING (RFC 2920), as real relays do; aiosmtpd reads pipelined commands in order anyway.
    pipelining: bool = True
    # How many MAIL commands to answer by closing the connection instead (a relay that dropped it).
    drop_mail: int = 0
    # EHLOs seen: one a connection.
    ehlos: int = 0
    # The name each EHLO gave.
    ehlo_names: list[str] = field(default_factory=list)
    # Once this many messages were accepted, every further message waits before its answer until
    # `holding` is cleared: emails stay on the wire (a relay that went slow) while a test looks.
    hold_after: int | None = None
    holding: bool = True
    # A receiver that throttles one domain, as Gmail does: past `throttle_limit` recipients of
    # `throttle_domain` accepted in `throttle_window` seconds, RCPT answers `421 4.7.28`.
    throttle_domain: str | None = None
    throttle_limit: int = 60
    throttle_window: float = 60.0
    throttle_accepted: deque[float] = field(default_factory=deque)
    # When each throttle reply was given (time.monotonic()).
    throttle_refused: list[float] = field(default_factory=list)
    # (time.monotonic(), recipient) of each accepted message, when a test or benchmark wants rates.
    arrivals: list[tuple[float, str]] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"smtp://{self.host}:{self.port}"

    def to(self, address: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if address in r.recipients]

    async def handle_EHLO(
        self, server: SMTPProtocol, session: Session, envelope: Envelope, hostname: str, responses: list[str]
    ) -> list[str]:
        session.host_name = hostname
        self.ehlos += 1
        self.ehlo_names.append(hostname)
        if self.pipelining:
            responses.insert(-1, "250-PIPELINING")
        return responses

    async def handle_MAIL(
        self, server: SMTPProtocol, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if self.drop_mail > 0:
            self.drop_mail -= 1
            assert server.transport is not None
            server.transport.close()
            return "421 4.4.2 closing"  # never reaches the client: the connection is gone
        answer = self.refuse_mail.get(address)
        if answer:
            return answer
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(
        self, server: SMTPProtocol, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        answer = self.refuse.get(address) or self._throttle(address)
        if answer:
            return answer
        envelope.rcpt_tos.append(address)
        return "250 OK"

    def _throttle(self, address: str) -> str | None:
        if self.throttle_domain is None or address.rpartition("@")[2].lower() != self.throttle_domain:
            return None
        now = time.monotonic()
        accepted = self.throttle_accepted
        while accepted and accepted[0] <= now - self.throttle_window:
            accepted.popleft()
        if len(accepted) >= self.throttle_limit:
            self.throttle_refused.append(now)
            return "421 4.7.28 Unusual rate of unsolicited mail from your IP address; try again later"
        accepted.append(now)
        return None

    async def handle_DATA(self, server: SMTPProtocol, session: Session, envelope: Envelope) -> str:
        if self.hold_after is not None and len(self.received) >= self.hold_after:
            while self.holding:
                await asyncio.sleep(0.01)
        answer = next((self.refuse_data[r] for r in envelope.rcpt_tos if r in self.refuse_data), None)
        if answer:
            return answer
        content = envelope.original_content or b""
        with self.lock:
            self.received.append(Received(str(envelope.mail_from), list(envelope.rcpt_tos), content))
            if self.arrivals is not None:
                self.arrivals.extend((time.monotonic(), r) for r in envelope.rcpt_tos)
        return "250 Message accepted"


@contextmanager
def running_sink() -> Iterator[SmtpSink]:
    """A loopback SMTP server for as long as the block runs (the fixture's, or a longer-lived one)."""
    with socket.socket() as probe:  # aiosmtpd's readiness check cannot work with port 0
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sink = SmtpSink("127.0.0.1", port)
    controller = Controller(sink, hostname="127.0.0.1", port=port, enable_SMTPUTF8=True)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()


@pytest.fixture
def smtp_sink() -> Iterator[SmtpSink]:
    with running_sink() as sink:
        yield sink
