"""A real SMTP server on loopback (aiosmtpd) that records what it receives and can refuse recipients."""

from __future__ import annotations

import email
import email.policy
import socket
import threading
from collections.abc import Iterator
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
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"smtp://{self.host}:{self.port}"

    def to(self, address: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if address in r.recipients]

    async def handle_RCPT(
        self, server: SMTPProtocol, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        answer = self.refuse.get(address)
        if answer:
            return answer
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTPProtocol, session: Session, envelope: Envelope) -> str:
        content = envelope.original_content or b""
        with self.lock:
            self.received.append(Received(str(envelope.mail_from), list(envelope.rcpt_tos), content))
        return "250 Message accepted"


@pytest.fixture
def smtp_sink() -> Iterator[SmtpSink]:
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
