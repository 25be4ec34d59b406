"""The SMTP transport against real servers on loopback: pipelined and one-by-one dialogues, what each
refusal means for an email, reused and dropped connections, AUTH, SMTPUTF8, and servers that go quiet."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from app.mail.sending.smtp import HeldContent, SmtpConnection, WireMessage
from app.mail.sending.transport import PermanentFailure, SmtpTransport, TemporaryFailure
from tests.mail.sending.conftest import Run, SmtpSink

MESSAGE = b"From: <news@example.com>\r\nSubject: Hi\r\n\r\nHello\r\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running(sink: SmtpSink, **options: Any) -> Iterator[SmtpSink]:
    controller = Controller(sink, hostname=sink.host, port=sink.port, **options)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()


@pytest.fixture(params=[True, False], ids=["pipelined", "one-by-one"])
def sink(request: pytest.FixtureRequest) -> Iterator[SmtpSink]:
    with running(SmtpSink("127.0.0.1", free_port(), pipelining=request.param), enable_SMTPUTF8=True) as s:
        yield s


def send_all(
    run: Run[list[Exception | None]], transport: SmtpTransport, *emails: tuple[str, str, bytes]
) -> list[Exception | None]:
    """Send one after another on one event loop; each result is None or the exception raised."""

    async def send() -> list[Exception | None]:
        results: list[Exception | None] = []
        try:
            for sender, recipient, message in emails:
                try:
                    await transport.send(sender, recipient, message)
                    results.append(None)
                except (TemporaryFailure, PermanentFailure) as exc:
                    results.append(exc)
        finally:
            await transport.close()
        return results

    return run(send())


def send_at_once(
    run: Run[list[BaseException | None]], transport: SmtpTransport, *recipients: str
) -> list[BaseException | None]:
    """Start every email at once on one event loop (their dialogues overlap on the pool's connections);
    each result is None or the exception raised."""

    async def send() -> list[BaseException | None]:
        try:
            return await asyncio.gather(
                *(transport.send("news@example.com", recipient, MESSAGE) for recipient in recipients),
                return_exceptions=True,
            )
        finally:
            await transport.close()

    return run(send())


def test_many_emails_over_few_connections(sink: SmtpSink, run: Run[Any]) -> None:
    transport = SmtpTransport(sink.url, size=2)

    async def go() -> None:
        try:
            await asyncio.gather(
                *(transport.send("news@example.com", f"r{n}@example.com", MESSAGE) for n in range(30))
            )
        finally:
            await transport.close()

    run(go())
    assert sorted(r.recipients[0] for r in sink.received) == sorted(f"r{n}@example.com" for n in range(30))
    assert sink.ehlos <= 2
    assert all(r.data == MESSAGE for r in sink.received)


def test_a_busy_connection_writes_each_content_ahead_of_the_next_emails_commands(
    run: Run[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With PIPELINING, an email's content waits for the next email on its connection and goes out in the
    same write as that email's MAIL, RCPT and DATA: one write and one round trip an email. The last one's
    content goes out alone."""
    writes: list[bytes] = []
    write = SmtpConnection._write

    def recording(connection: SmtpConnection, data: bytes) -> None:
        writes.append(data)
        write(connection, data)

    monkeypatch.setattr(SmtpConnection, "_write", recording)
    with running(SmtpSink("127.0.0.1", free_port())) as sink:
        results = send_at_once(run, SmtpTransport(sink.url, size=1), *(f"r{n}@example.com" for n in range(4)))
    assert results == [None] * 4
    commands = [
        f"MAIL FROM:<news@example.com> SIZE={len(MESSAGE)}\r\nRCPT TO:<r{n}@example.com>\r\nDATA\r\n".encode()
        for n in range(4)
    ]
    content = MESSAGE + b".\r\n"
    assert writes[1:-1] == [commands[0], *(content + c for c in commands[1:]), content]
    assert [r.recipients for r in sink.received] == [[f"r{n}@example.com"] for n in range(4)]


def test_connections_given_back_in_one_turn_each_carry_their_content_to_the_next_email(
    run: Run[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forty emails at once over four connections: connections often come back to the pool in one turn
    of the event loop (their replies arrive together), each holding its email's content, while emails
    wait for one. Each content goes out ahead of a waiting email's commands, and its email sees it
    taken; only the last on each connection, when no email waits, is left to go out alone."""
    looked_alone: list[bytes] = []  # contents left on an idle connection when their email looked
    settle_alone = SmtpTransport._settle_alone

    async def counted(transport: SmtpTransport, connection: SmtpConnection, held: HeldContent) -> None:
        looked_alone.append(held.content)
        await settle_alone(transport, connection, held)

    monkeypatch.setattr(SmtpTransport, "_settle_alone", counted)
    with running(SmtpSink("127.0.0.1", free_port())) as sink:
        results = send_at_once(
            run, SmtpTransport(sink.url, size=4), *(f"r{n}@example.com" for n in range(40))
        )
    assert results == [None] * 40
    assert len(sink.received) == 40
    assert len(looked_alone) <= 4


def test_each_refusal_goes_to_its_own_email_when_the_dialogues_overlap(run: Run[Any]) -> None:
    """Emails sent at once over one pipelining connection: each answer, the content's included (it comes
    with the next email's answers), is its own email's."""
    with running(SmtpSink("127.0.0.1", free_port())) as sink:
        sink.refuse["gone@example.com"] = "550 5.1.1 No such user"
        sink.refuse_data["spam@example.com"] = "554 5.7.1 Looks like spam"
        sink.refuse_data["full@example.com"] = "452 4.2.2 Mailbox full"
        recipients = ["ok1", "spam", "gone", "full", "ok2", "spam", "ok3"]
        results = send_at_once(
            run, SmtpTransport(sink.url, size=1), *(f"{r}@example.com" for r in recipients)
        )
    assert [r is None for r in results] == [True, False, False, False, True, False, True]
    assert "554" in str(results[1]) and "554" in str(results[5]) and "550" in str(results[2])
    assert isinstance(results[3], TemporaryFailure) and "452" in str(results[3])
    assert [r.recipients[0] for r in sink.received] == [
        "ok1@example.com",
        "ok2@example.com",
        "ok3@example.com",
    ]
    assert sink.ehlos == 1


class ClosingAfterOneMessage(SmtpSink):
    """A relay that takes one message a connection, then closes it at the next MAIL (some hosted relays cap
    messages a connection), having answered the message first."""

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        taken = getattr(session, "taken", 0)
        session.taken = taken + 1
        if taken == 1:
            self.drop_mail = 1
        return await super().handle_MAIL(server, session, envelope, address, options)


def test_a_relay_closing_after_a_message_loses_neither_that_answer_nor_the_next_email(run: Run[Any]) -> None:
    """The content's answer arrived before the relay closed the connection at the next email's MAIL (they
    were written together): the first email is sent, and the next goes out on a fresh connection."""
    with running(ClosingAfterOneMessage("127.0.0.1", free_port())) as sink:
        results = send_at_once(run, SmtpTransport(sink.url, size=1), *(f"r{n}@example.com" for n in range(3)))
    assert results == [None, None, None]
    assert sorted(r.recipients[0] for r in sink.received) == [f"r{n}@example.com" for n in range(3)]
    assert sink.ehlos >= 2


def test_line_endings_and_leading_dots_are_fixed_on_the_way(sink: SmtpSink, run: Run[Any]) -> None:
    odd = b"Subject: dots\n\n.hidden line\r..two dots\r\nend"
    assert send_all(run, SmtpTransport(sink.url, size=1), ("a@example.com", "b@example.com", odd)) == [None]
    assert sink.received[0].data == b"Subject: dots\r\n\r\n.hidden line\r\n..two dots\r\nend\r\n"


def test_each_refusal_fails_its_own_email_and_the_connection_goes_on(sink: SmtpSink, run: Run[Any]) -> None:
    sink.refuse["later@example.com"] = "451 4.7.1 Greylisted"
    sink.refuse["gone@example.com"] = "550 5.1.1 No such user"
    sink.refuse_mail["blocked@example.com"] = "553 5.7.1 Sender refused"
    sink.refuse_data["spam@example.com"] = "554 5.7.1 Looks like spam"
    sink.refuse_data["full@example.com"] = "452 4.2.2 Mailbox full"
    results = send_all(
        run,
        SmtpTransport(sink.url, size=1),
        ("news@example.com", "later@example.com", MESSAGE),
        ("news@example.com", "gone@example.com", MESSAGE),
        ("blocked@example.com", "ok1@example.com", MESSAGE),
        ("news@example.com", "spam@example.com", MESSAGE),
        ("news@example.com", "full@example.com", MESSAGE),
        ("news@example.com", "ok2@example.com", MESSAGE),
    )
    later, gone, blocked, spam, full, ok = results
    assert isinstance(later, TemporaryFailure) and "451" in str(later)
    assert isinstance(gone, PermanentFailure) and gone.bounce and "550" in str(gone)
    assert isinstance(blocked, PermanentFailure) and not blocked.bounce
    assert isinstance(spam, PermanentFailure) and not spam.bounce and "554" in str(spam)
    assert isinstance(full, TemporaryFailure)
    assert ok is None
    assert [r.recipients for r in sink.received] == [["ok2@example.com"]]
    assert sink.ehlos == 1  # every refusal left the dialogue in step: one connection throughout


def test_a_pooled_connection_the_relay_dropped_is_replaced_without_losing_the_email(
    sink: SmtpSink, run: Run[Any]
) -> None:
    transport = SmtpTransport(sink.url, size=1)

    async def go() -> None:
        try:
            await transport.send("news@example.com", "first@example.com", MESSAGE)
            sink.drop_mail = 1  # the pooled connection dies at the next MAIL, before any content
            await transport.send("news@example.com", "second@example.com", MESSAGE)
        finally:
            await transport.close()

    run(go())
    assert [r.recipients[0] for r in sink.received] == ["first@example.com", "second@example.com"]
    assert sink.ehlos == 2


def test_non_ascii_addresses_need_smtputf8(run: Run[Any]) -> None:
    with running(SmtpSink("127.0.0.1", free_port()), enable_SMTPUTF8=True) as utf8:
        assert send_all(
            run, SmtpTransport(utf8.url, 1), ("news@example.com", "josé@example.com", MESSAGE)
        ) == [None]
        assert utf8.received[0].recipients == ["josé@example.com"]
    with running(SmtpSink("127.0.0.1", free_port()), enable_SMTPUTF8=False) as plain:
        [refused] = send_all(
            run, SmtpTransport(plain.url, 1), ("news@example.com", "josé@example.com", MESSAGE)
        )
        assert isinstance(refused, PermanentFailure) and not refused.bounce
        assert "SMTPUTF8" in str(refused)


def test_a_content_held_for_an_email_refused_for_want_of_smtputf8_goes_out_alone(run: Run[Any]) -> None:
    """The first email's content is held for the next email on its connection, which takes the
    connection, waits for its place, and is refused before writing anything (a non-ASCII address, a
    relay without SMTPUTF8): the first email's sender, which left its content to that email, still gets
    it delivered and answered."""
    with running(SmtpSink("127.0.0.1", free_port()), enable_SMTPUTF8=False) as sink:
        transport = SmtpTransport(sink.url, size=1)

        async def slow_place() -> None:
            await asyncio.sleep(0.05)  # the first email looks at its connection meanwhile: taken

        async def go() -> list[BaseException | None]:
            try:
                return await asyncio.wait_for(
                    asyncio.gather(
                        transport.send("news@example.com", "first@example.com", MESSAGE),
                        transport.send("news@example.com", "josé@example.com", MESSAGE, admit=slow_place),
                        return_exceptions=True,
                    ),
                    5,
                )
            finally:
                await transport.close()

        first, second = run(go())
    assert first is None
    assert isinstance(second, PermanentFailure) and "SMTPUTF8" in str(second)
    assert [r.recipients for r in sink.received] == [["first@example.com"]]


def test_an_email_cancelled_while_its_content_is_held_leaves_the_next_email_unharmed(run: Run[Any]) -> None:
    """The process stops while the first email waits for its content's answer (held for the next email
    on its connection): the next email still writes that content ahead of its own commands and is sent."""
    with running(SmtpSink("127.0.0.1", free_port())) as sink:
        transport = SmtpTransport(sink.url, size=1)

        async def go() -> tuple[bool, BaseException | None]:
            first = asyncio.ensure_future(transport.send("news@example.com", "first@example.com", MESSAGE))

            async def cancel_the_first() -> None:
                first.cancel()
                await asyncio.sleep(0)

            try:
                second = await asyncio.gather(
                    transport.send("news@example.com", "second@example.com", MESSAGE, admit=cancel_the_first),
                    return_exceptions=True,
                )
                await asyncio.gather(first, return_exceptions=True)
                return first.cancelled(), second[0]
            finally:
                await transport.close()

        cancelled, second = run(go())
    assert cancelled and second is None
    assert [r.recipients for r in sink.received] == [["first@example.com"], ["second@example.com"]]


def test_an_address_that_would_inject_commands_is_refused_before_sending(
    sink: SmtpSink, run: Run[Any]
) -> None:
    [refused] = send_all(
        run,
        SmtpTransport(sink.url, 1),
        ("news@example.com", "a@example.com>\r\nRCPT TO:<b@example.com", MESSAGE),
    )
    assert isinstance(refused, PermanentFailure) and not refused.bounce
    assert sink.received == [] and sink.ehlos == 0


def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    good = isinstance(data, LoginPassword) and (data.login, data.password) == (b"mailer", b"s3cret:/@")
    return AuthResult(success=good, handled=False)


@pytest.mark.parametrize("mechanism", ["PLAIN", "LOGIN"])
def test_login_with_plain_or_login(mechanism: str, run: Run[Any]) -> None:
    excluded = [m for m in ("PLAIN", "LOGIN") if m != mechanism]
    sink = SmtpSink("127.0.0.1", free_port())
    options = {"authenticator": authenticator, "auth_require_tls": False, "auth_exclude_mechanism": excluded}
    with running(sink, **options):
        good = SmtpTransport(f"smtp://mailer:s3cret%3A%2F%40@127.0.0.1:{sink.port}", 1)
        assert send_all(run, good, ("news@example.com", "a@example.com", MESSAGE)) == [None]
        bad = SmtpTransport(f"smtp://mailer:wrong@127.0.0.1:{sink.port}", 1)
        [refused] = send_all(run, bad, ("news@example.com", "b@example.com", MESSAGE))
        # A refused login is the relay's set-up, not this email's fault: try again later.
        assert isinstance(refused, TemporaryFailure) and "535" in str(refused)
    assert [r.recipients for r in sink.received] == [["a@example.com"]]


def test_an_unreachable_relay_fails_fast_after_the_first_try(run: Run[Any]) -> None:
    transport = SmtpTransport(f"smtp://127.0.0.1:{free_port()}", 2)
    started = time.monotonic()
    results = send_all(
        run, transport, *[("news@example.com", f"r{n}@example.com", MESSAGE) for n in range(5)]
    )
    assert all(isinstance(r, TemporaryFailure) for r in results)
    assert "a moment ago" in str(results[-1])
    assert time.monotonic() - started < 5


def test_an_email_takes_its_place_before_its_first_byte_and_none_on_a_relay_it_cannot_reach(
    sink: SmtpSink, run: Run[Any]
) -> None:
    """The send worker's count of emails a crash could leave sent twice (recorder.py) takes an email's
    place under its connection, before anything of it is written; not when no connection is made."""
    taken_with_received: list[int] = []

    async def admit() -> None:
        taken_with_received.append(len(sink.received))

    transport = SmtpTransport(sink.url, size=1)

    async def go() -> None:
        try:
            await transport.send("news@example.com", "a@example.com", MESSAGE, admit=admit)
        finally:
            await transport.close()

    run(go())
    assert taken_with_received == [0] and len(sink.received) == 1
    unreachable = SmtpTransport(f"smtp://127.0.0.1:{free_port()}", 1)
    with pytest.raises(TemporaryFailure):
        run(unreachable.send("news@example.com", "b@example.com", MESSAGE, admit=admit))
    assert taken_with_received == [0]


@pytest.mark.parametrize("quiet_after", [b"", b"220 hi\r\n", b"220 hi\r\n250 ok\r\n"])
def test_a_relay_that_stops_answering_times_out(quiet_after: bytes, run: Run[Any]) -> None:
    """Silent at the greeting, at EHLO, or at MAIL: a temporary failure after the timeout."""

    async def go() -> Exception | None:
        replies = iter([quiet_after])

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(next(replies, b""))
            await asyncio.sleep(5)
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport = SmtpTransport(f"smtp://127.0.0.1:{port}", 1, timeout=0.3)
        try:
            await transport.send("news@example.com", "a@example.com", MESSAGE)
        except TemporaryFailure as exc:
            return exc
        finally:
            await transport.close()
            server.close()
        return None

    started = time.monotonic()
    failure = run(go())
    assert isinstance(failure, TemporaryFailure)
    assert time.monotonic() - started < 3


def test_an_email_whose_held_content_is_lost_unwritten_goes_out_again_once(
    sink: SmtpSink, run: Run[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its content held, an email whose connection is lost before the content is written goes out again
    on another connection, once: a relay that always drops the connection there fails it for now,
    rather than keeping it going round."""
    if not sink.pipelining:
        pytest.skip("content is held only with PIPELINING")
    losses = 0

    async def lost_before_writing(connection: SmtpConnection, held: HeldContent) -> tuple[int, str]:
        nonlocal losses
        losses += 1
        connection.abort()  # what a connection closed by the relay comes to: the held content is lost
        return await held.reply

    monkeypatch.setattr(SmtpConnection, "settle", lost_before_writing)
    [failure] = send_all(run, SmtpTransport(sink.url, size=1), ("news@example.com", "a@example.com", MESSAGE))
    assert isinstance(failure, TemporaryFailure)
    assert losses == 2 and sink.ehlos == 2
    assert sink.received == []


def test_rendered_messages_go_out_as_they_are(sink: SmtpSink, run: Run[Any]) -> None:
    wire = WireMessage(b"Subject: ready\r\n\r\nalready in SMTP form\r\n")
    assert send_all(run, SmtpTransport(sink.url, 1), ("a@example.com", "b@example.com", wire)) == [None]
    assert sink.received[0].data == bytes(wire)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subprocess.run(
        [*request, "-subj", "/CN=localhost", "-keyout", key, "-out", cert], check=True, capture_output=True
    )
    return cert, key


def server_context(certificate: tuple[str, str]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


def test_starttls_then_login(certificate: tuple[str, str], run: Run[Any]) -> None:
    sink = SmtpSink("127.0.0.1", free_port())
    options = {"tls_context": server_context(certificate), "require_starttls": True}
    options |= {"authenticator": authenticator, "auth_require_tls": True}
    with running(sink, **options):
        url = f"smtp://mailer:s3cret%3A%2F%40@127.0.0.1:{sink.port}?starttls=1&verify=0"
        assert send_all(run, SmtpTransport(url, 1), ("news@example.com", "a@example.com", MESSAGE)) == [None]
        # Without STARTTLS this server refuses MAIL with a 530: a 5xx, so that email fails.
        [refused] = send_all(
            run,
            SmtpTransport(f"smtp://127.0.0.1:{sink.port}", 1),
            ("news@example.com", "b@example.com", MESSAGE),
        )
        assert isinstance(refused, PermanentFailure) and "530" in str(refused)
        # A certificate that does not verify is refused unless verify=0.
        [unverified] = send_all(
            run,
            SmtpTransport(f"smtp://127.0.0.1:{sink.port}?starttls=1", 1),
            ("news@example.com", "c@example.com", MESSAGE),
        )
        assert isinstance(unverified, TemporaryFailure)
    assert [r.recipients for r in sink.received] == [["a@example.com"]]


def test_implicit_tls(certificate: tuple[str, str], run: Run[Any]) -> None:
    sink = SmtpSink("127.0.0.1", free_port())
    with running(sink, ssl_context=server_context(certificate)):
        url = f"smtps://127.0.0.1:{sink.port}?verify=0"
        assert send_all(run, SmtpTransport(url, 1), ("news@example.com", "a@example.com", MESSAGE)) == [None]
    assert [r.recipients for r in sink.received] == [["a@example.com"]]
