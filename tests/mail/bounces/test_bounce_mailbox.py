"""The bounce mailbox (VERP): a campaign sent by a real `tidings worker` to the loopback SMTP server
carries the signed VERP envelope sender when TIDINGS_BOUNCE_DOMAIN is set and the plain sender when not;
DSNs in each MTA's own layout, piped into the real `tidings bounces ingest`, mark the right deliverable
(hard for 5.x.x, soft for 4.x.x) and nothing else; the exit status is what Postfix's pipe(8) reads."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.config import Settings
from app.kit.imap_mailbox import ImapMailbox
from app.mail.bounces.bounce_mailbox import MAX_NESTED_PARTS, Unreadable, parse_message, read_dsn
from app.mail.sending.tokens import MailTokens
from app.models import BlockedRejection, Contact, Deliverable, Suppression
from tests.mail.bounces import dsn_samples
from tests.mail.conftest import (
    BASE,
    BOUNCE_DOMAIN,
    FROM_EMAIL,
    Email,
    Sample,
    Sent,
    committed_campaign,
    drop_account,
    send_with_worker,
    state_of,
    unique,
)
from tests.processes import SECRET_KEY, environment, tidings_script


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


def ingest(sent: Sent, dsn: bytes, *args: str, **env: str) -> Done:
    """`tidings bounces ingest` as Postfix's pipe(8) runs it: the message on standard input."""
    done = subprocess.run(
        [tidings_script(), "bounces", "ingest", *args],
        input=dsn,
        env=environment(sent.database_url, sent.var_dir, BASE, TIDINGS_BOUNCE_DOMAIN=BOUNCE_DOMAIN, **env),
        capture_output=True,
        timeout=60,
    )
    return Done(done.returncode, done.stdout.decode(), done.stderr.decode())


def test_each_email_leaves_with_its_own_signed_verp_sender(sent: Sent) -> None:
    tokens = MailTokens(SECRET_KEY)
    senders = set()
    for email in sent.emails:
        local, _, domain = email.mail_from.partition("@")
        assert domain == BOUNCE_DOMAIN
        assert local == f"bounces+{tokens.verp_token(email.deliverable_id)}"
        assert local == local.lower()
        assert tokens.read_verp(local.removeprefix("bounces+")) == email.deliverable_id
        senders.add(email.mail_from)
    assert len(senders) == len(sent.emails)
    # Signed with the secret key: another key reads none of them.
    assert (
        MailTokens("another-secret-key-long-enough-to-sign").read_verp(
            sent.emails[0].mail_from.split("+")[1].split("@")[0]
        )
        is None
    )


def test_without_a_bounce_domain_the_envelope_sender_is_the_campaigns(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    prefix = unique("plain")
    account_id, _ = committed_campaign(engine, prefix, 3)
    try:
        received = send_with_worker(database_url, tmp_path / "var")
    finally:
        drop_account(engine, account_id)
    mine = [
        (mail_from, unsubscribe) for mail_from, rcpt, _, unsubscribe in received if rcpt.startswith(prefix)
    ]
    assert [mail_from for mail_from, _ in mine] == [FROM_EMAIL] * 3
    # No mailbox reads a mailto address then, so none is offered: the https link alone.
    assert all(
        "mailto:" not in unsubscribe and unsubscribe.startswith("<https://") for _, unsubscribe in mine
    )


@pytest.mark.parametrize(
    ("sample", "status"),
    [
        (dsn_samples.postfix, "5.1.1"),
        (dsn_samples.gmail, "5.1.1"),
        (dsn_samples.exchange, "5.1.10"),
        (dsn_samples.exim, None),
    ],
    ids=["postfix", "gmail", "exchange", "exim"],
)
def test_a_permanent_failure_hard_bounces_its_deliverable_only(
    sent: Sent, engine: Engine, sample: Sample, status: str | None
) -> None:
    email, neighbour = sent.take(), sent.take()
    done = ingest(sent, sample(email.mail_from, email.address, email.message_id))
    assert done.returncode == 0, done.stderr
    shown = f" ({status})" if status else ""
    assert done.stdout.strip() == f"hard bounce{shown} of deliverable {email.deliverable_id}"
    assert state_of(engine, email) == ("bounced", True, True)
    assert state_of(engine, neighbour) == ("sent", False, False)
    # A repeated DSN (the MTA retried the pipe) changes nothing and still exits 0.
    again = ingest(sent, sample(email.mail_from, email.address, email.message_id))
    assert again.returncode == 0, again.stderr
    assert state_of(engine, email) == ("bounced", True, True)


def test_a_delay_is_a_soft_bounce_that_marks_nothing(sent: Sent, engine: Engine) -> None:
    email = sent.take()
    done = ingest(sent, dsn_samples.postfix_delay(email.mail_from, email.address, email.message_id))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"soft bounce (4.4.1) of deliverable {email.deliverable_id}"
    assert state_of(engine, email) == ("sent", False, False)


@pytest.mark.parametrize(
    ("sample", "status"),
    [(dsn_samples.gmail_unauthenticated, "5.7.26"), (dsn_samples.microsoft_block_list, "5.7.1")],
    ids=["gmail-5.7.26", "microsoft-5.7.1"],
)
def test_a_refusal_of_the_sender_is_blocked_recorded_and_suppresses_nothing(
    sent: Sent, engine: Engine, sample: Sample, status: str
) -> None:
    email = sent.take()
    done = ingest(sent, sample(email.mail_from, email.address, email.message_id))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"blocked bounce ({status}) of deliverable {email.deliverable_id}"
    assert state_of(engine, email) == ("sent", False, False)
    with Session(engine) as session:
        assert session.scalar(select(Suppression).where(Suppression.email_key == email.address)) is None
        recorded = session.execute(
            select(BlockedRejection.receiving_domain, BlockedRejection.status).where(
                BlockedRejection.deliverable_id == email.deliverable_id
            )
        ).one()
    assert tuple(recorded) == (email.address.rpartition("@")[2], status)


def unsubscribed(engine: Engine, email: Email) -> bool:
    with Session(engine) as session:
        return (
            session.scalar(select(Contact.unsubscribed_at).where(Contact.id == email.contact_id)) is not None
        )


def test_mail_to_the_signed_list_unsubscribe_address_unsubscribes_that_contact_only(
    sent: Sent, engine: Engine
) -> None:
    email, neighbour = sent.take(), sent.take()
    tokens = MailTokens(SECRET_KEY)
    address = f"unsubscribe+{tokens.unsubscribe_address_token(email.deliverable_id)}@{BOUNCE_DOMAIN}"
    assert f"<mailto:{address}>" in email.list_unsubscribe
    assert email.list_unsubscribe.startswith(f"<{BASE}/u/")
    # An automatic reply to the address is no request; a forged address (another contact's id with a
    # made-up signature) is ignored.
    auto = ingest(
        sent, dsn_samples.unsubscribe_request(email.list_unsubscribe, auto_reply=True), "--recipient", address
    )
    assert auto.stdout.strip() == "ignored: not a bounce"
    forged = email.list_unsubscribe.replace(f"+{email.deliverable_id}-", f"+{neighbour.deliverable_id}-")
    assert ingest(sent, dsn_samples.unsubscribe_request(forged)).stdout.strip() == "ignored: not a bounce"
    assert not unsubscribed(engine, email) and not unsubscribed(engine, neighbour)

    done = ingest(sent, dsn_samples.unsubscribe_request(email.list_unsubscribe), "--recipient", address)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"unsubscribe request for deliverable {email.deliverable_id}"
    assert unsubscribed(engine, email) and not unsubscribed(engine, neighbour)
    assert state_of(engine, email) == ("sent", False, False)  # no bounce, and not suppressed
    with Session(engine) as session:
        assert session.scalar(select(Suppression).where(Suppression.email_key == email.address)) is None
        assert (
            session.scalar(select(Deliverable.unsubscribed_at).where(Deliverable.id == email.deliverable_id))
            is not None
        )


def test_the_envelope_recipient_argument_names_the_email_when_the_headers_lost_it(
    sent: Sent, engine: Engine
) -> None:
    """A DSN whose To was rewritten (an alias) and whose returned headers lack the Return-Path: only the
    address Postfix passes as ${recipient} (lowercased by some MTA on the way) still names the email."""
    email, other = sent.take(), sent.take()
    dsn = dsn_samples.exchange("bounces@" + BOUNCE_DOMAIN, email.address, "<elsewhere@example.org>")
    done = ingest(sent, dsn, "--recipient", email.mail_from.upper())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"hard bounce (5.1.10) of deliverable {email.deliverable_id}"
    assert state_of(engine, email) == ("bounced", True, True)
    assert state_of(engine, other) == ("sent", False, False)


def test_without_a_verp_address_the_returned_message_id_names_the_email(sent: Sent, engine: Engine) -> None:
    email = sent.take()
    plain = f"bounces@{BOUNCE_DOMAIN}"
    done = ingest(sent, dsn_samples.postfix(plain, email.address, email.message_id, to=plain))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"hard bounce (5.1.1) of deliverable {email.deliverable_id}"
    assert state_of(engine, email) == ("bounced", True, True)


def test_forged_or_foreign_bounces_change_nothing(sent: Sent, engine: Engine) -> None:
    email = sent.take()
    deliverable_id = email.deliverable_id
    forged = f"bounces+{deliverable_id}-{'0' * 12}@{BOUNCE_DOMAIN}"
    samples = [
        # A VERP address with a wrong signature, and a Message-ID Tidings never sent for it.
        dsn_samples.postfix(forged, email.address, f"<{deliverable_id}.1.00000000@mail.example.org>"),
        # No VERP address, and only the recipient's address: not trusted on its own.
        dsn_samples.postfix(f"news@{BOUNCE_DOMAIN}", email.address, "<other@example.org>"),
    ]
    for dsn in samples:
        done = ingest(sent, dsn)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ignored: a hard bounce naming no email sent by Tidings"
    for dsn, said in [
        (dsn_samples.human_reply(email.mail_from), "ignored: not a bounce"),
        (
            dsn_samples.complaint(forged, email.address, f"<{deliverable_id}.1.00000000@mail.example.org>"),
            "ignored: a complaint report (ARF) naming no email sent by Tidings",
        ),
        (b"\x00\xff not a message at all", "ignored: not a bounce"),
        (b"", "ignored: not a bounce"),
    ]:
        done = ingest(sent, dsn)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().startswith(said)
    assert state_of(engine, email) == ("sent", False, False)


def test_a_message_nested_past_the_cap_is_ignored_as_unreadable_and_nothing_logs_a_traceback(
    sent: Sent, engine: Engine
) -> None:
    email = sent.take()
    deep = dsn_samples.nested_multiparts(1000, email.mail_from)
    assert 50_000 < len(deep) < 70_000
    for dsn, said in [
        (deep, "ignored: unreadable"),
        (dsn_samples.nested_multiparts(MAX_NESTED_PARTS + 1, email.mail_from), "ignored: unreadable"),
        (dsn_samples.without_from(email.mail_from), "ignored: not a bounce"),
        (dsn_samples.human_reply(email.mail_from), "ignored: not a bounce"),
    ]:
        done = ingest(sent, dsn)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == said
        assert "Traceback" not in done.stderr, done.stderr
    assert state_of(engine, email) == ("sent", False, False)


def test_the_nesting_cap_is_counted_before_parsing() -> None:
    parse_message(dsn_samples.nested_multiparts(MAX_NESTED_PARTS - 1))  # the cap, with the text part
    with pytest.raises(Unreadable):
        parse_message(dsn_samples.nested_multiparts(MAX_NESTED_PARTS + 1))


def test_an_unreachable_database_is_a_temporary_failure_for_postfix_to_retry(
    sent: Sent, tmp_path: Path
) -> None:
    email = sent.take()
    dsn = dsn_samples.postfix(email.mail_from, email.address, email.message_id)
    for unreachable in (
        "postgresql+psycopg://postgres@127.0.0.1:9/tidings",  # the discard port: nothing listens
        f"sqlite:///{tmp_path}/no/such/folder/tidings.db",
    ):
        done = ingest(sent, dsn, TIDINGS_DATABASE_URL=unreachable)
        assert done.returncode == 75, (done.stdout, done.stderr)
        assert "try again later" in done.stderr
        assert "Traceback" not in done.stderr


def test_each_sample_reads_the_same_whatever_its_wording() -> None:
    """The reading itself, without a database: the kind, the status and the VERP deliverable."""
    tokens = MailTokens(SECRET_KEY)
    verp = f"bounces+{tokens.verp_token(42)}@{BOUNCE_DOMAIN}"
    message_id = "<42.7.0a1b2c3d@mail.example.org>"
    expected = {
        dsn_samples.postfix: ("hard", "5.1.1"),
        dsn_samples.gmail: ("hard", "5.1.1"),
        dsn_samples.exchange: ("hard", "5.1.10"),
        dsn_samples.exim: ("hard", None),
        dsn_samples.postfix_delay: ("soft", "4.4.1"),
        dsn_samples.complaint: ("complaint", None),
    }
    for sample, (kind, status) in expected.items():
        dsn = read_dsn(parse_message(sample(verp, "ann@example.net", message_id)), tokens)
        assert (dsn.kind, dsn.status, dsn.verp_deliverable_id, dsn.message_id) == (
            kind,
            status,
            42,
            message_id,
        ), sample.__name__


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("bounce_domain", "bounces example.com"),
        ("bounce_domain", "bounces@example.com"),
        ("bounce_imap_url", "pop3://user:pass@mail.example.com/INBOX"),
        ("bounce_imap_url", "imaps://mail.example.com/INBOX"),  # no user
    ],
)
def test_an_unusable_bounce_setting_is_refused_when_read(setting: str, value: str) -> None:
    with pytest.raises(ValidationError):
        Settings(**{setting: value})


def test_the_bounce_settings_are_read_as_written() -> None:
    settings = Settings(
        bounce_domain=" Bounces.Example.COM. ",
        bounce_imap_url="imaps://bounces%40example.com:p%3Ass@imap.example.com/Bounces",
    )
    assert settings.bounce_domain == "bounces.example.com"
    mailbox = ImapMailbox.from_url(settings.bounce_imap_url)
    assert (mailbox.username, mailbox.password, mailbox.host, mailbox.port, mailbox.mailbox) == (
        "bounces@example.com",
        "p:ss",
        "imap.example.com",
        993,
        "Bounces",
    )
    assert "p:ss" not in mailbox.describe()


def test_a_complaint_report_in_the_mailbox_marks_its_email_unsubscribes_and_suppresses_once(
    sent: Sent, engine: Engine
) -> None:
    email = sent.take()
    report = dsn_samples.complaint(email.mail_from, email.address, email.message_id)
    for _ in range(2):  # a feedback loop may send the report twice: the second changes nothing
        done = ingest(sent, report)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"complaint about deliverable {email.deliverable_id}"
    with Session(engine) as session:
        deliverable = session.get(Deliverable, email.deliverable_id)
        contact = session.get(Contact, email.contact_id)
        assert deliverable is not None and contact is not None
        assert deliverable.spam_at is not None and contact.unsubscribed_at is not None
        suppressed = session.scalars(
            select(Suppression.reason).where(Suppression.email_key == email.address.lower())
        ).all()
        assert suppressed == ["complaint"]
