"""Bounces as the MTAs people send through write them, for the email Tidings sent from `verp` (its
envelope sender) to `rcpt` with the Message-ID `message_id`. Each follows its MTA's own layout and
wording (Postfix's bounce(8) templates, Exim's classic text bounce, Google's and Microsoft 365's
non-delivery reports), so that what decides is the status, never the prose."""

from __future__ import annotations

HEADERS = """Return-Path: <{verp}>
Received: from tidings.example.org (tidings.example.org [198.51.100.7])
\tby mx.example.org (Postfix) with ESMTPS id 3F1A2B
\tfor <{rcpt}>; Wed, 25 Nov 2026 14:00:00 +0000 (UTC)
From: "Tidings" <news@example.com>
To: <{rcpt}>
Subject: Hello
Date: Wed, 25 Nov 2026 14:00:00 +0000
Message-ID: {message_id}
List-Unsubscribe-Post: List-Unsubscribe=One-Click
MIME-Version: 1.0
"""


def _crlf(text: str) -> bytes:
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-8")


def postfix(verp: str, rcpt: str, message_id: str, *, to: str | None = None) -> bytes:
    """Postfix's bounce: multipart/report with text/rfc822-headers (headers only)."""
    headers = HEADERS.format(verp=verp, rcpt=rcpt, message_id=message_id)
    return _crlf(f"""Return-Path: <>
Delivered-To: {to or verp}
Received: by mx.example.org (Postfix)
\tid 4B2C1D; Wed, 25 Nov 2026 14:00:02 +0000 (UTC)
Date: Wed, 25 Nov 2026 14:00:02 +0000 (UTC)
From: MAILER-DAEMON@mx.example.org (Mail Delivery System)
Subject: Undelivered Mail Returned to Sender
To: {to or verp}
Auto-Submitted: auto-replied
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
\tboundary="3F1A2B.1795600002/mx.example.org"
Content-Transfer-Encoding: 8bit
Message-Id: <20261125140002.4B2C1D@mx.example.org>

This is a MIME-encapsulated message.

--3F1A2B.1795600002/mx.example.org
Content-Description: Notification
Content-Type: text/plain; charset=us-ascii

This is the mail system at host mx.example.org.

I'm sorry to have to inform you that your message could not
be delivered to one or more recipients. It's attached below.

For further assistance, please send mail to postmaster.

If you do so, please include this problem report. You can
delete your own text from the attached returned message.

                   The mail system

<{rcpt}>: host mx.example.com[192.0.2.25] said: 550 5.1.1
    <{rcpt}>: Recipient address rejected: User unknown in local recipient
    table (in reply to RCPT TO command)

--3F1A2B.1795600002/mx.example.org
Content-Description: Delivery report
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.example.org
X-Postfix-Queue-ID: 3F1A2B
X-Postfix-Sender: rfc822; {verp}
Arrival-Date: Wed, 25 Nov 2026 14:00:00 +0000 (UTC)

Final-Recipient: rfc822; {rcpt}
Original-Recipient: rfc822;{rcpt}
Action: failed
Status: 5.1.1
Remote-MTA: dns; mx.example.com
Diagnostic-Code: smtp; 550 5.1.1 <{rcpt}>: Recipient address rejected: User
    unknown in local recipient table

--3F1A2B.1795600002/mx.example.org
Content-Description: Undelivered Message Headers
Content-Type: text/rfc822-headers
Content-Transfer-Encoding: 8bit

{headers}
--3F1A2B.1795600002/mx.example.org--
""")


def postfix_delay(verp: str, rcpt: str, message_id: str) -> bytes:
    """Postfix's delay warning (delay_warning_time): Action delayed, a 4.x.x status."""
    headers = HEADERS.format(verp=verp, rcpt=rcpt, message_id=message_id)
    return _crlf(f"""Return-Path: <>
Date: Wed, 25 Nov 2026 18:00:02 +0000 (UTC)
From: MAILER-DAEMON@mx.example.org (Mail Delivery System)
Subject: Delayed Mail (still being retried)
To: {verp}
Auto-Submitted: auto-replied
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
\tboundary="9C8D7E.1795614402/mx.example.org"
Message-Id: <20261125180002.9C8D7E@mx.example.org>

--9C8D7E.1795614402/mx.example.org
Content-Description: Notification
Content-Type: text/plain; charset=us-ascii

This is the mail system at host mx.example.org.

####################################################################
# THIS IS A WARNING ONLY.  YOU DO NOT NEED TO RESEND YOUR MESSAGE. #
####################################################################

Your message could not be delivered for more than 4 hour(s).
It will be retried until it is 5 day(s) old.

<{rcpt}>: connect to mx.example.com[192.0.2.25]:25: Connection timed out

--9C8D7E.1795614402/mx.example.org
Content-Description: Delivery report
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.example.org
X-Postfix-Queue-ID: 9C8D7E
X-Postfix-Sender: rfc822; {verp}
Arrival-Date: Wed, 25 Nov 2026 14:00:00 +0000 (UTC)

Final-Recipient: rfc822; {rcpt}
Original-Recipient: rfc822;{rcpt}
Action: delayed
Status: 4.4.1
Diagnostic-Code: X-Postfix; connect to mx.example.com[192.0.2.25]:25: Connection
    timed out
Will-Retry-Until: Mon, 30 Nov 2026 14:00:00 +0000 (UTC)

--9C8D7E.1795614402/mx.example.org
Content-Description: Undelivered Message Headers
Content-Type: text/rfc822-headers

{headers}
--9C8D7E.1795614402/mx.example.org--
""")


def exim(verp: str, rcpt: str, message_id: str, *, reply: str = "550 No such mailbox here, sorry") -> bytes:
    """Exim's classic bounce: plain text, X-Failed-Recipients, the message copied after a separator
    (no delivery-status part: read by flufl.bounce's Exim detector)."""
    headers = HEADERS.format(verp=verp, rcpt=rcpt, message_id=message_id)
    return _crlf(f"""Return-path: <>
Envelope-to: {verp}
Delivery-date: Wed, 25 Nov 2026 14:00:03 +0000
Received: from mail by mx.example.net with local (Exim 4.96)
\tid 1vA2bC-000123-Xy
\tfor {verp}; Wed, 25 Nov 2026 14:00:03 +0000
X-Failed-Recipients: {rcpt}
Auto-Submitted: auto-replied
From: Mail Delivery System <Mailer-Daemon@mx.example.net>
To: {verp}
Content-Type: text/plain; charset=us-ascii
Subject: Mail delivery failed: returning message to sender
Message-Id: <E1vA2bC-000123-Xy@mx.example.net>
Date: Wed, 25 Nov 2026 14:00:03 +0000

This message was created automatically by mail delivery software.

A message that you sent could not be delivered to one or more of its
recipients. This is a permanent error. The following address(es) failed:

  {rcpt}
    host mx.example.com [192.0.2.25]
    SMTP error from remote mail server after RCPT TO:<{rcpt}>:
    {reply}

------ This is a copy of the message, including all the headers. ------

{headers}
Hi Ada
""")


GMAIL_NO_SUCH_USER = """smtp; 550-5.1.1 The email account that you tried to reach does not exist. Please try
 550-5.1.1 double-checking the recipient's email address for typos or
 550 5.1.1  https://support.google.com/mail/?p=NoSuchUser"""
GMAIL_UNAUTHENTICATED = """smtp; 550-5.7.26 This mail has been blocked because the sender is unauthenticated.
 550-5.7.26 Gmail requires all senders to authenticate with either SPF or DKIM.
 550 5.7.26  https://support.google.com/mail/answer/81126#authentication"""
GMAIL_RATE_LIMITED = """smtp; 421-4.7.28 Gmail has detected an unusual rate of unsolicited mail originating
 421-4.7.28 from your DKIM domain. To protect our users from spam, mail sent from your
 421 4.7.28 domain has been temporarily rate limited.
 421 4.7.28  https://support.google.com/mail/?p=UnsolicitedRateLimitError"""


def gmail(
    verp: str,
    rcpt: str,
    message_id: str,
    *,
    action: str = "failed",
    status: str = "5.1.1",
    diagnostic: str = GMAIL_NO_SUCH_USER,
) -> bytes:
    """Google's non-delivery report: html and text first, then the delivery status and the whole
    original message (message/rfc822)."""
    headers = HEADERS.format(verp=verp, rcpt=rcpt, message_id=message_id)
    return _crlf(f"""Delivered-To: {verp}
Return-Path: <>
Received: by 2002:a05:6a10:aa0b:0:0:0:0 with SMTP id h11csp123456pxa;
        Wed, 25 Nov 2026 06:00:04 -0800 (PST)
From: Mail Delivery Subsystem <mailer-daemon@googlemail.com>
To: {verp}
Auto-Submitted: auto-replied
Subject: Delivery Status Notification (Failure)
References: {message_id}
In-Reply-To: {message_id}
X-Failed-Recipients: {rcpt}
Message-ID: <6560a1b2.050a0220.5c1f.0abc.GMR@mx.google.com>
Date: Wed, 25 Nov 2026 06:00:04 -0800 (PST)
MIME-Version: 1.0
Content-Type: multipart/report; boundary="00000000000011aa22bb33cc44dd"; report-type=delivery-status

--00000000000011aa22bb33cc44dd
Content-Type: multipart/related; boundary="00000000000011aa22bb33cc44ee"

--00000000000011aa22bb33cc44ee
Content-Type: multipart/alternative; boundary="00000000000011aa22bb33cc44ff"

--00000000000011aa22bb33cc44ff
Content-Type: text/plain; charset="UTF-8"


** Address not found **

Your message wasn't delivered to {rcpt} because the address couldn't be found, or is unable to
receive mail.

Learn more here: https://support.google.com/mail/?p=NoSuchUser

The response was:

The email account that you tried to reach does not exist. Please try double-checking the
recipient's email address for typos or unnecessary spaces.

--00000000000011aa22bb33cc44ff
Content-Type: text/html; charset="UTF-8"

<html><body><h2>Address not found</h2><p>Your message wasn't delivered to <b>{rcpt}</b> because
the address couldn't be found, or is unable to receive mail.</p></body></html>

--00000000000011aa22bb33cc44ff--
--00000000000011aa22bb33cc44ee--
--00000000000011aa22bb33cc44dd
Content-Type: message/delivery-status

Reporting-MTA: dns; googlemail.com
Received-From-MTA: dns; tidings.example.org
Arrival-Date: Wed, 25 Nov 2026 06:00:03 -0800 (PST)
X-Original-Message-ID: {message_id}

Final-Recipient: rfc822; {rcpt}
Action: {action}
Status: {status}
Diagnostic-Code: {diagnostic}
Last-Attempt-Date: Wed, 25 Nov 2026 06:00:04 -0800 (PST)

--00000000000011aa22bb33cc44dd
Content-Type: message/rfc822

{headers}Content-Type: text/plain; charset="utf-8"

Hi Ada

--00000000000011aa22bb33cc44dd--
""")


EXCHANGE_NOT_FOUND = """smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient {rcpt} not found by SMTP
 address lookup"""
MICROSOFT_BLOCK_LIST = """smtp;550 5.7.1 Unfortunately, messages from [198.51.100.7] weren't sent. Please
 contact your Internet service provider since part of their network is on our block list (S3150)."""


def exchange(
    verp: str,
    rcpt: str,
    message_id: str,
    *,
    to: str | None = None,
    status: str = "5.1.10",
    diagnostic: str = EXCHANGE_NOT_FOUND,
) -> bytes:
    """Microsoft 365 / Exchange's NDR ("Undeliverable:"): a 5.1.10 status with Exchange's own wording,
    the delivery status base64-encoded, the original's headers as message/rfc822-headers."""
    import base64

    status = f"""Reporting-MTA: dns;AM0PR01MB1234.eurprd01.prod.exchangelabs.com
Received-From-MTA: dns;tidings.example.org
Arrival-Date: Wed, 25 Nov 2026 14:00:00 +0000

Original-Recipient: rfc822;{rcpt}
Final-Recipient: rfc822;{rcpt}
Action: failed
Status: {status}
Diagnostic-Code: {diagnostic.format(rcpt=rcpt)}
X-Display-Name: {rcpt}
"""
    encoded = base64.encodebytes(status.replace("\n", "\r\n").encode()).decode()
    headers = HEADERS.format(verp=verp, rcpt=rcpt, message_id=message_id)
    return _crlf(f"""From: Microsoft Outlook
\t<MicrosoftExchange329e71ec88ae4615bbc36ab6ce41109e@example.onmicrosoft.com>
To: <{to or verp}>
Date: Wed, 25 Nov 2026 14:00:05 +0000
Content-Type: multipart/report; report-type=delivery-status;
\tboundary="e4b2c9a0-1d3f-4c8e-9a7b-2f6e5d4c3b2a"
X-MS-Exchange-Message-Is-Ndr:
Content-Language: en-US
Message-ID: <c5a1f0e2-7b3d-4e8a-b6c9-0d1e2f3a4b5c@AM0PR01MB1234.eurprd01.prod.exchangelabs.com>
In-Reply-To: {message_id}
References: {message_id}
Subject: Undeliverable: Hello
Auto-Submitted: auto-replied
MIME-Version: 1.0

--e4b2c9a0-1d3f-4c8e-9a7b-2f6e5d4c3b2a
Content-Type: multipart/alternative; differences=Content-Type;
\tboundary="0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"

--0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d
Content-Type: text/plain; charset="us-ascii"

Your message to {rcpt} couldn't be delivered.
{rcpt.split("@")[0]} wasn't found at {rcpt.split("@")[1]}.
Action Required: Unknown To address

--0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d
Content-Type: text/html; charset="us-ascii"

<html><body><p>Your message to {rcpt} couldn't be delivered.</p></body></html>

--0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d--

--e4b2c9a0-1d3f-4c8e-9a7b-2f6e5d4c3b2a
Content-Type: message/delivery-status
Content-Transfer-Encoding: base64

{encoded}
--e4b2c9a0-1d3f-4c8e-9a7b-2f6e5d4c3b2a
Content-Type: message/rfc822-headers

{headers}
--e4b2c9a0-1d3f-4c8e-9a7b-2f6e5d4c3b2a--
""")


def complaint(verp: str, rcpt: str, message_id: str) -> bytes:
    """An ARF feedback report (RFC 5965), as a mailbox provider's feedback loop sends it."""
    headers = HEADERS.format(verp=verp, rcpt=rcpt, message_id=message_id)
    return _crlf(f"""From: <feedbackloop@example.net>
To: <{verp}>
Subject: FW: Hello
Date: Wed, 25 Nov 2026 15:00:00 +0000
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report;
\tboundary="part1_13d.2e68ed54_boundary"

--part1_13d.2e68ed54_boundary
Content-Type: text/plain; charset="US-ASCII"

This is an email abuse report for an email message received from IP 198.51.100.7.

--part1_13d.2e68ed54_boundary
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: SomeGenerator/1.0
Version: 1
Original-Rcpt-To: {rcpt}

--part1_13d.2e68ed54_boundary
Content-Type: message/rfc822
Content-Disposition: inline

{headers}
Hi Ada
--part1_13d.2e68ed54_boundary--
""")


def human_reply(verp: str) -> bytes:
    return _crlf(f"""From: Ada <ada@example.com>
To: {verp}
Subject: Re: Hello
Message-ID: <reply-1@example.com>

Thanks for the newsletter!
""")


# The classes of bounce_classes.py, each in a layout above: a refusal of the sender (blocked), a
# temporary refusal (soft).
def gmail_unauthenticated(verp: str, rcpt: str, message_id: str) -> bytes:
    return gmail(verp, rcpt, message_id, status="5.7.26", diagnostic=GMAIL_UNAUTHENTICATED)


def gmail_rate_limited(verp: str, rcpt: str, message_id: str) -> bytes:
    return gmail(verp, rcpt, message_id, action="delayed", status="4.7.28", diagnostic=GMAIL_RATE_LIMITED)


def microsoft_block_list(verp: str, rcpt: str, message_id: str) -> bytes:
    return exchange(verp, rcpt, message_id, status="5.7.1", diagnostic=MICROSOFT_BLOCK_LIST)


def exim_content_rejected(verp: str, rcpt: str, message_id: str) -> bytes:
    return exim(verp, rcpt, message_id, reply="550 5.7.1 Message rejected due to content restrictions")


def unsubscribe_request(list_unsubscribe: str, *, auto_reply: bool = False) -> bytes:
    """What a mail client sends for the mailto entry of an email's List-Unsubscribe (RFC 2369): a short
    message to the address, with the subject the URL asks for; or a vacation notice sent to it."""
    mailto = list_unsubscribe.split("<mailto:")[1].split(">")[0]
    address, _, query = mailto.partition("?")
    subject = query.removeprefix("subject=") or "unsubscribe"
    auto = "Auto-Submitted: auto-replied\n" if auto_reply else ""
    return _crlf(f"""Return-Path: <ann@example.net>
Delivered-To: {address}
From: Ann <ann@example.net>
To: {address}
Subject: {"Out of office" if auto_reply else subject}
Date: Wed, 25 Nov 2026 15:00:00 +0000
Message-ID: <unsubscribe-request.1@mail.example.net>
{auto}MIME-Version: 1.0
Content-Type: text/plain; charset=us-ascii

{"I am away until Monday." if auto_reply else "unsubscribe"}
""")


def nested_multiparts(depth: int, verp: str = "bounces@example.org") -> bytes:
    """A message of `depth` multiparts, each the only part of the one around it (1,000 of them are
    about 68 KB, and more than Python's email parser can follow)."""
    head = f"From: mailer@example.org\nTo: {verp}\nSubject: nested\nMIME-Version: 1.0\n"
    opening = "".join(f"Content-Type: multipart/mixed; boundary=b{n}\n\n--b{n}\n" for n in range(depth))
    closing = "".join(f"\n--b{n}--\n" for n in reversed(range(depth)))
    return _crlf(head + opening + "Content-Type: text/plain\n\nhello\n" + closing)


def without_from(verp: str) -> bytes:
    """A message with no From header: one of flufl.bounce's detectors raises on it."""
    return _crlf(f"To: {verp}\nSubject: no sender\n\nhello\n")
