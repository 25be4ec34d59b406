"""ARF complaint reports (RFC 5965) into complaint Reports: the RFC's example, Yahoo- and AOL-shaped
reports, and what is not a complaint report."""

from __future__ import annotations

from email import message_from_bytes

import pytest

from app.mail.bounces.arf import complaint_report
from app.mail.bounces.reports import Report
from tests.mail.bounces.arf_samples import ORIGINAL, RFC_5965_EXAMPLE, aol_style, yahoo_style


def test_the_rfc_5965_example_names_its_recipient_and_message_id() -> None:
    assert complaint_report(RFC_5965_EXAMPLE) == Report(
        type="complaint", email="user@example.com", message_id="8787KJKJ3K4J3K4J3K4J3.mail@example.net"
    )


def test_a_yahoo_report_takes_original_rcpt_to_and_the_originals_message_id() -> None:
    found = complaint_report(yahoo_style(ORIGINAL, "ann@example.com"))
    assert found == Report(
        type="complaint", email="ann@example.com", message_id="<12.3.9f2c41aa@mail.example.com>"
    )


def test_an_aol_report_of_headers_only_takes_the_originals_to() -> None:
    found = complaint_report(aol_style(ORIGINAL))
    assert found == Report(
        type="complaint", email="ann@example.com", message_id="<12.3.9f2c41aa@mail.example.com>"
    )


def test_text_and_parsed_messages_are_read_too() -> None:
    raw = yahoo_style(ORIGINAL, "<ann@example.com>")
    expected = complaint_report(raw)
    assert expected is not None and expected.email == "ann@example.com"
    assert complaint_report(raw.decode()) == expected
    assert complaint_report(message_from_bytes(raw)) == expected


def test_rfc822_prefixed_recipients_are_read() -> None:
    found = complaint_report(yahoo_style(ORIGINAL, "rfc822; Ann@Example.com"))
    assert found is not None and found.email == "Ann@Example.com"


@pytest.mark.parametrize("kind", ["not-spam", "auth-failure", "NOT-SPAM"])
def test_feedback_that_is_no_complaint_gives_nothing(kind: str) -> None:
    raw = yahoo_style(ORIGINAL, "ann@example.com").replace(
        b"Feedback-Type: abuse", b"Feedback-Type: " + kind.encode()
    )
    assert complaint_report(raw) is None


@pytest.mark.parametrize("kind", ["fraud", "virus", "other"])
def test_other_feedback_types_are_complaints(kind: str) -> None:
    raw = yahoo_style(ORIGINAL, "ann@example.com").replace(
        b"Feedback-Type: abuse", b"Feedback-Type: " + kind.encode()
    )
    assert complaint_report(raw) is not None


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not an email at all \x00\xff",
        ORIGINAL,
        # A DSN is a multipart/report too, of another report type.
        RFC_5965_EXAMPLE.replace(b"report-type=feedback-report", b"report-type=delivery-status"),
        # No feedback part.
        yahoo_style(ORIGINAL, "ann@example.com").replace(b"message/feedback-report", b"text/plain"),
        # No recipient anywhere.
        aol_style(ORIGINAL.replace(b"To: Ann Reader <ann@example.com>\n", b"")),
        # A recipient that is no address.
        yahoo_style(ORIGINAL.replace(b"To: Ann Reader <ann@example.com>\n", b""), "redacted"),
        # A NUL in the recipient: no Report can hold it.
        yahoo_style(ORIGINAL, "a\x00n@example.com"),
        b"Content-Type: multipart/report; report-type=feedback-report; boundary=x\n\n--x--\n",
        b"Content-Type: multipart/report; report-type=feedback-report\n\nno boundary at all",
    ],
)
def test_what_is_not_a_complaint_report_gives_nothing(raw: bytes) -> None:
    assert complaint_report(raw) is None
