"""ARF (RFC 5965) complaint emails as mailbox providers send them: the RFC's own example, and reports
shaped like Yahoo's and AOL's feedback loops around an original email."""

from __future__ import annotations

# RFC 5965, appendix B.2 (the recipient and the Message-ID as the RFC prints them).
RFC_5965_EXAMPLE = b"""\
From: <abusedesk@example.com>
Date: Thu, 8 Mar 2005 17:40:36 EDT
Subject: FW: Earn money
To: <abuse@example.net>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report;
     boundary="part1_13d.2e68ed54_boundary"

--part1_13d.2e68ed54_boundary
Content-Type: text/plain; charset="US-ASCII"
Content-Transfer-Encoding: 7bit

This is an email abuse report for an email message received from IP
192.0.2.1 on Thu, 8 Mar 2005 14:00:00 EDT.  For more information
about this format please see http://www.mipassoc.org/arf/.

--part1_13d.2e68ed54_boundary
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: SomeGenerator/1.0
Version: 1
Original-Mail-From: <somespammer@example.net>
Original-Rcpt-To: <user@example.com>
Arrival-Date: Thu, 8 Mar 2005 14:00:00 EDT
Reporting-MTA: dns; mail.example.com
Source-IP: 192.0.2.1
Authentication-Results: mail.example.com;
               spf=fail smtp.mail=somespammer@example.com
Reported-Domain: example.net
Reported-Uri: http://example.net/earn_money.html
Reported-Uri: mailto:user@example.com
Removal-Recipient: user@example.com

--part1_13d.2e68ed54_boundary
Content-Type: message/rfc822
Content-Disposition: inline

From: <somespammer@example.net>
Received: from mailserver.example.net (mailserver.example.net
        [192.0.2.1]) by example.com with ESMTP id M63d4137594e46;
        Thu, 08 Mar 2005 14:00:00 -0400
To: <Undisclosed Recipients>
Subject: Earn money
MIME-Version: 1.0
Content-type: text/plain
Message-ID: 8787KJKJ3K4J3K4J3K4J3.mail@example.net
Date: Thu, 02 Sep 2004 12:31:03 -0500

Spam Spam Spam
Spam Spam Spam
Spam Spam Spam
Spam Spam Spam
--part1_13d.2e68ed54_boundary--
"""


def yahoo_style(original: bytes, recipient: str) -> bytes:
    """Yahoo's complaint feedback loop: CRLF lines, Original-Rcpt-To without brackets, the whole original."""
    report = (
        b"Return-Path: <feedback@arf.mail.yahoo.com>\r\n"
        b"From: Yahoo! Mail AntiSpam Feedback <feedback@arf.mail.yahoo.com>\r\n"
        b"To: fbl@tidings.example\r\n"
        b"Subject: FW: Hello\r\n"
        b"Date: Wed, 25 Nov 2026 10:00:00 +0000\r\n"
        b"MIME-Version: 1.0\r\n"
        b'Content-Type: multipart/report; boundary="------------Boundary-00=_7ZQE2X1"; '
        b"report-type=feedback-report\r\n"
        b"\r\n"
        b"--------------Boundary-00=_7ZQE2X1\r\n"
        b"Content-Type: text/plain; charset=us-ascii\r\n"
        b"\r\n"
        b"This is an email abuse report for an email message received from IP 192.0.2.25 on "
        b"Wed, 25 Nov 2026 09:58:11 +0000.\r\n"
        b"\r\n"
        b"--------------Boundary-00=_7ZQE2X1\r\n"
        b"Content-Type: message/feedback-report\r\n"
        b"\r\n"
        b"Feedback-Type: abuse\r\n"
        b"User-Agent: Yahoo!-Mail-Feedback/2.0\r\n"
        b"Version: 0.1\r\n"
        b"Original-Mail-From: <bounces@tidings.example>\r\n"
        b"Original-Rcpt-To: " + recipient.encode() + b"\r\n"
        b"Received-Date: Wed, 25 Nov 2026 09:58:11 +0000\r\n"
        b"Reported-Domain: example.com\r\n"
        b"Authentication-Results: mta1000.mail.gq1.yahoo.com  from=example.com; domainkeys=neutral "
        b"(no sig);  from=example.com; dkim=pass (ok)\r\n"
        b"\r\n"
        b"--------------Boundary-00=_7ZQE2X1\r\n"
        b"Content-Type: message/rfc822\r\n"
        b"\r\n" + original.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n") + b"\r\n"
        b"--------------Boundary-00=_7ZQE2X1--\r\n"
    )
    return report


def aol_style(original: bytes) -> bytes:
    """AOL's feedback loop: no Original-Rcpt-To, the original's headers only (text/rfc822-headers)."""
    headers = original.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0]
    return (
        b"From: scomp@aol.net\n"
        b"To: fbl@tidings.example\n"
        b"Subject: Email Feedback Report for IP 192.0.2.25\n"
        b"MIME-Version: 1.0\n"
        b'Content-Type: multipart/report; report-type="feedback-report";\n'
        b'\tboundary="boundary-1138-2468-2-5"\n'
        b"\n"
        b"--boundary-1138-2468-2-5\n"
        b'Content-Type: text/plain; charset="US-ASCII"\n'
        b"\n"
        b"This is an email abuse report for an email message with the message-id of "
        b"(see below) received from IP 192.0.2.25.\n"
        b"\n"
        b"--boundary-1138-2468-2-5\n"
        b"Content-Type: message/feedback-report\n"
        b"\n"
        b"Feedback-Type: abuse\n"
        b"User-Agent: AOL SComp\n"
        b"Version: 0.1\n"
        b"Received-Date: Wed, 25 Nov 2026 09:58:11 -0500\n"
        b"Source-IP: 192.0.2.25\n"
        b"Reported-Domain: example.com\n"
        b"\n"
        b"--boundary-1138-2468-2-5\n"
        b"Content-Type: text/rfc822-headers\n"
        b"\n" + headers + b"\n"
        b"\n"
        b"--boundary-1138-2468-2-5--\n"
    )


ORIGINAL = b"""\
Return-Path: <bounces@tidings.example>
From: Tidings <news@example.com>
To: Ann Reader <ann@example.com>
Subject: Hello
Message-ID: <12.3.9f2c41aa@mail.example.com>
Date: Wed, 25 Nov 2026 09:58:00 +0000
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

Hi there
"""
