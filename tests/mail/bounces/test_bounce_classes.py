"""One classifier for every way a refusal reaches Tidings (bounce_classes.py): real replies and DSNs of
Postfix, Exim, Exchange, Gmail, Microsoft and SES, and each provider webhook's format. Only a dead
address is hard; a refusal of the sender is blocked; a temporary one soft."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.kit.time import utcnow
from app.mail.bounces.bounce_classes import classify, enhanced_status
from app.mail.bounces.bounce_mailbox import parse_message, read_dsn
from app.mail.bounces.providers import Events, mailgun, postmark, sendgrid, ses
from app.mail.sending.pace import is_throttle
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import Deferred, PermanentFailure, SmtpTransport, TemporaryFailure
from tests.mail.bounces import dsn_samples
from tests.mail.bounces.providers.samples import (
    SendGridSigner,
    mailgun_body,
    mailgun_failed,
    postmark_bounce,
    sendgrid_event,
    ses_bounce,
)
from tests.mail.conftest import BOUNCE_DOMAIN, Sample
from tests.processes import SECRET_KEY
from tests.smtp_sink import running_sink

GMAIL_UNAUTHENTICATED = (
    "550-5.7.26 This mail has been blocked because the sender is unauthenticated. Gmail requires all "
    "senders to authenticate with either SPF or DKIM."
)
MICROSOFT_BLOCK_LIST = (
    "550 5.7.1 Unfortunately, messages from [198.51.100.7] weren't sent. Please contact your Internet "
    "service provider since part of their network is on our block list (S3150)."
)


# Replies of each MTA and provider, with their class.
REPLIES = [
    # Dead addresses: hard.
    (
        "550 5.1.1 <ann@example.com>: Recipient address rejected: User unknown in local recipient table",
        "hard",
    ),
    ("550 No such mailbox here, sorry", "hard"),  # Exim, no enhanced code: its words
    ("550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", "hard"),
    ("550 5.4.1 Recipient address rejected: Access denied. AS(201806281)", "hard"),  # Microsoft
    ("554 5.2.1 The email account that you tried to reach is disabled", "hard"),
    ("550 5.0.0 <ann@example.com>... User unknown", "hard"),
    ("smtp; 550 5.1.1 user unknown", "hard"),  # SES's diagnosticCode
    # Refusals of the sender: blocked.
    (GMAIL_UNAUTHENTICATED, "blocked"),
    (
        "550-5.7.1 [198.51.100.7] Our system has detected that this message is likely unsolicited mail",
        "blocked",
    ),
    (MICROSOFT_BLOCK_LIST, "blocked"),
    ("554 5.7.5 Permanent error evaluating DMARC policy", "blocked"),
    ("552 5.3.4 Message size exceeds fixed limit", "blocked"),
    ("550 5.1.8 Sender address rejected: Domain not found", "blocked"),
    ("554 Message rejected: spam content detected", "blocked"),  # no enhanced code: its words
    ("550 5.5.0 Protocol error", "blocked"),
    # Temporary: soft.
    (
        "421-4.7.28 Gmail has detected an unusual rate of unsolicited mail from your DKIM domain",
        "soft",
    ),
    ("454 Throttling failure: Maximum sending rate exceeded.", "soft"),  # SES
    (
        "451 4.7.500 Server busy. Please try again later from [198.51.100.7]. (S77719)",
        "soft",
    ),  # Microsoft
    ("452 4.2.2 The email account that you tried to reach is over quota", "soft"),
    ("552 5.2.2 Mailbox full", "soft"),
]


@pytest.mark.parametrize(("reply", "expected"), REPLIES)
def test_replies_of_each_mta_get_their_class(reply: str, expected: str) -> None:
    assert classify(reply) == expected


@pytest.mark.parametrize(
    ("reply", "expected"), [(reply, expected) for reply, expected in REPLIES if reply[:3].isdigit()]
)
def test_each_reply_as_an_smtp_refusal_gets_its_class(reply: str, expected: str) -> None:
    """The same replies given at RCPT by a real SMTP server: a hard one bounces, a blocked one fails
    as blocked, a soft one is retried (a throttle reply deferred, pace.py), whatever the class says."""
    with running_sink() as sink:
        # One line: the samples keep their first line's continuation mark ("550-5.7.26 ...").
        sink.refuse["ann@example.net"] = reply[:3] + " " + reply[4:]
        transport = SmtpTransport(sink.url, size=1)

        async def send() -> BaseException | None:
            try:
                await transport.send("news@example.com", "ann@example.net", b"Subject: x\r\n\r\nx\r\n")
            except (TemporaryFailure, PermanentFailure) as exc:
                return exc
            finally:
                await transport.close()
            return None

        refused = asyncio.run(send())
    if expected == "soft":
        assert isinstance(refused, TemporaryFailure)
        assert isinstance(refused, Deferred) is is_throttle(int(reply[:3]), reply[4:])
    else:
        assert isinstance(refused, PermanentFailure)
        assert (refused.bounce, refused.blocked) == (expected == "hard", expected == "blocked")


def test_what_the_provider_reported_decides_when_the_words_do_not() -> None:
    assert classify(None, "hard") == "hard"
    assert classify("", "blocked") == "blocked"
    assert classify("Test bounce details", "hard") == "hard"
    # A provider that says it retries is believed, whatever the code.
    assert classify(GMAIL_UNAUTHENTICATED, "soft") == "soft"
    # The code wins over the provider's "hard".
    assert classify(GMAIL_UNAUTHENTICATED, "hard") == "blocked"
    assert enhanced_status(GMAIL_UNAUTHENTICATED) == "5.7.26"
    assert enhanced_status("10.1.1.5 is an address") is None


@pytest.mark.parametrize(
    ("sample", "kind", "status"),
    [
        (dsn_samples.postfix, "hard", "5.1.1"),
        (dsn_samples.gmail, "hard", "5.1.1"),
        (dsn_samples.exchange, "hard", "5.1.10"),
        (dsn_samples.exim, "hard", None),
        (dsn_samples.gmail_unauthenticated, "blocked", "5.7.26"),
        (dsn_samples.microsoft_block_list, "blocked", "5.7.1"),
        (dsn_samples.exim_content_rejected, "blocked", "5.7.1"),
        (dsn_samples.gmail_rate_limited, "soft", "4.7.28"),
        (dsn_samples.postfix_delay, "soft", "4.4.1"),
    ],
    ids=lambda value: getattr(value, "__name__", None) or str(value),
)
def test_each_dsn_in_the_bounce_mailbox_gets_its_class(sample: Sample, kind: str, status: str) -> None:
    tokens = MailTokens(SECRET_KEY)
    verp = f"bounces+{tokens.verp_token(42)}@{BOUNCE_DOMAIN}"
    dsn = read_dsn(parse_message(sample(verp, "ann@example.net", "<42.7.0a1b@mail.example.org>")), tokens)
    assert (dsn.kind, dsn.status, dsn.verp_deliverable_id) == (kind, status, 42)
    if kind == "blocked":
        assert dsn.diagnostic and "5.7." in dsn.diagnostic


def _classes(events: Events) -> list[tuple[str, str]]:
    return [(report.type, report.bounce_class()) for report in events.reports]


def test_postmark_records_get_their_class() -> None:
    hard = postmark_bounce("ann@example.com")
    blocked_by_words = {**postmark_bounce("ann@example.com"), "Details": f"smtp;{GMAIL_UNAUTHENTICATED}"}
    blocked = postmark_bounce("ann@example.com", "Blocked", 100000)
    soft = postmark_bounce("ann@example.com", "SoftBounce", 4096)
    classes = [
        _classes(postmark.read(json.dumps(r).encode())) for r in (hard, blocked_by_words, blocked, soft)
    ]
    assert classes == [
        [("bounce", "hard")],
        [("bounce", "blocked")],
        [("bounce", "blocked")],
        [("bounce", "soft")],
    ]


def test_sendgrid_events_get_their_class() -> None:
    signer = SendGridSigner.make()
    events = [
        sendgrid_event(
            "bounce", "a@example.com", None, type="bounce", status="5.1.1", reason="550 5.1.1 unknown"
        ),
        sendgrid_event(
            "bounce", "b@example.com", None, type="bounce", status="5.7.26", reason=GMAIL_UNAUTHENTICATED
        ),
        sendgrid_event(
            "bounce", "c@example.com", None, type="blocked", status="5.0.0", reason="550 rejected"
        ),
        sendgrid_event("deferred", "d@example.com", None, response="421 4.7.28 rate limited"),
    ]
    body = json.dumps(events).encode()
    headers = signer.headers(body)
    read = sendgrid.read(
        body,
        signer.public_key,
        headers[sendgrid.SIGNATURE_HEADER],
        headers[sendgrid.TIMESTAMP_HEADER],
        utcnow(),
    )
    assert _classes(read) == [
        ("bounce", "hard"),
        ("bounce", "blocked"),
        ("bounce", "blocked"),
        ("bounce", "soft"),
    ]


def test_ses_bounces_get_their_class() -> None:
    def bounce(status: str, diagnostic: str, subtype: str = "General", bounce_type: str = "Permanent") -> str:
        notification = ses_bounce("ann@example.com", None, bounce_type)
        notification["bounce"]["bounceSubType"] = subtype
        notification["bounce"]["bouncedRecipients"][0].update(status=status, diagnosticCode=diagnostic)
        return json.dumps(notification)

    assert _classes(ses.notification_events(bounce("5.1.1", "smtp; 550 5.1.1 user unknown"))) == [
        ("bounce", "hard")
    ]
    assert _classes(ses.notification_events(bounce("5.7.1", f"smtp; {MICROSOFT_BLOCK_LIST}"))) == [
        ("bounce", "blocked")
    ]
    assert _classes(ses.notification_events(bounce("5.0.0", "", "ContentRejected"))) == [
        ("bounce", "blocked")
    ]
    assert _classes(ses.notification_events(bounce("4.7.28", "", bounce_type="Transient"))) == [
        ("bounce", "soft")
    ]


def test_mailgun_failures_get_their_class() -> None:
    key = "mailgun-signing-key"

    def failed(code: int, enhanced: str, message: str, severity: str = "permanent") -> bytes:
        event = mailgun_failed("ann@example.com", None, severity)
        event["delivery-status"].update({"code": code, "enhanced-code": enhanced, "message": message})
        return json.dumps(mailgun_body(key, event)).encode()

    assert _classes(mailgun.read(failed(550, "5.1.1", "mailbox unavailable"), key, utcnow())) == [
        ("bounce", "hard")
    ]
    assert _classes(mailgun.read(failed(550, "5.7.26", GMAIL_UNAUTHENTICATED), key, utcnow())) == [
        ("bounce", "blocked")
    ]
    assert _classes(mailgun.read(failed(421, "4.7.28", "rate limited", "temporary"), key, utcnow())) == [
        ("bounce", "soft")
    ]
    # Mailgun's own refusal of an address it saw bounce before (code 605, no enhanced code) stays hard.
    assert _classes(
        mailgun.read(
            json.dumps(mailgun_body(key, mailgun_failed("a@example.com", None))).encode(), key, utcnow()
        )
    ) == [("bounce", "hard")]
