"""What a refusal means for the address: one classifier for every way a bounce reaches Tidings (the SMTP
dialogue, the bounce mailbox, POST /webhooks/bounces and the four provider webhooks).

The class comes from the RFC 3463 enhanced status code (`class.subject.detail`) when there is one, from
the reply's wording when the code says nothing (`5.0.0`, or none), and from what the provider reported
when neither tells:

- `hard`: the address is dead (no such mailbox or domain, mailbox disabled: 5.1.x, 5.2.0, 5.2.1,
  5.2.4, 5.4.4). It suppresses the address.
- `blocked`: the receiver refused the *sender* (authentication, policy, reputation, content, size:
  5.7.x, 5.6.x, 5.5.x, 5.1.7, 5.1.8, 5.2.3, 5.3.4). The address may be perfectly good, so nothing is
  suppressed: the refusal is recorded, counted per receiving domain, and stops the campaign when there
  are too many at one domain (a DKIM or DNS outage would otherwise suppress a whole provider's users).
- `soft`: temporary (4.x.x, a full mailbox 5.2.2, mail system and routing trouble 5.3.x, 5.4.x):
  nothing changes, the relay retries.

A provider that reports a bounce as temporary is believed (it retries either way).
"""

from __future__ import annotations

import re
from typing import Literal

BounceClass = Literal["hard", "blocked", "soft"]

ENHANCED_STATUS = re.compile(r"(?<![\d.])([245])\.(\d{1,3})\.(\d{1,3})(?![\d.])")
# A basic reply code at the start of the diagnostic or after `smtp;` (Diagnostic-Code: smtp; 550 ...).
REPLY_CODE = re.compile(r"(?:^|[;:\s])([245])\d\d(?:[\s-]|$)")
# Wording of refusals aimed at the sender, checked first: a policy refusal that also says "mailbox"
# must never suppress a good address.
BLOCKED_WORDS = re.compile(
    r"spam|block ?list|blocked|blacklist|denylist|listed at|reputation|policy|authenticat|dmarc|\bspf\b"
    r"|dkim|not authori[sz]ed|rejected due to|content rejected|too many|rate limit|bulk mail",
    re.IGNORECASE,
)
DEAD_ADDRESS_WORDS = re.compile(
    r"user unknown|unknown user|no such (?:user|mailbox|recipient|address)|does not exist|doesn't exist"
    r"|mailbox (?:unavailable|not found|disabled|is disabled)|invalid (?:recipient|mailbox|address)"
    r"|recipient (?:not found|unknown|address rejected)|address rejected|account (?:disabled|closed)"
    r"|no mailbox|not a valid (?:mailbox|recipient)|unrouteable address",
    re.IGNORECASE,
)

# 5.2.x, the mailbox: full (2) is temporary, a message too long for it (3) the sender's doing.
MAILBOX_DETAILS: dict[int, BounceClass] = {0: "hard", 1: "hard", 2: "soft", 3: "blocked", 4: "hard"}


def enhanced_status(text: str | None) -> str | None:
    """The first RFC 3463 status code in a reply or diagnostic (`5.7.26`), or None."""
    match = ENHANCED_STATUS.search(text or "")
    return match.group(0) if match else None


def classify(diagnostic: str | None, reported: BounceClass = "hard") -> BounceClass:
    """The class of a refusal: `diagnostic` is whatever text came with it (an SMTP reply, a DSN's Status
    and Diagnostic-Code, a provider's status and reason); `reported` is what the provider (or the
    message's form) said when the text does not tell."""
    if reported == "soft":
        return "soft"
    text = diagnostic or ""
    match = ENHANCED_STATUS.search(text)
    if match is not None:
        by_code = _by_code(int(match.group(1)), int(match.group(2)), int(match.group(3)), text)
        if by_code is not None:
            return by_code
    else:
        reply = REPLY_CODE.search(text)
        if reply is not None and reply.group(1) == "4":
            return "soft"
    if BLOCKED_WORDS.search(text):
        return "blocked"
    if DEAD_ADDRESS_WORDS.search(text):
        return "hard"
    return reported


def _by_code(kind: int, subject: int, detail: int, text: str) -> BounceClass | None:
    """The class an enhanced status code gives; None when it leaves the question to the wording
    (x.0.0, and the protocol errors some servers use for an unknown user)."""
    if kind == 2:
        return None
    if kind == 4:
        return "soft"
    if subject == 1:
        return "blocked" if detail in (7, 8) else "hard"  # 5.1.7, 5.1.8: the sender's address is bad
    if subject == 2:
        return MAILBOX_DETAILS.get(detail, "hard")
    if subject == 3:
        return "blocked" if detail == 4 else "soft"  # 5.3.4: too big for the receiver
    if subject == 4:
        if detail == 4 or (detail == 1 and DEAD_ADDRESS_WORDS.search(text)):
            return "hard"  # no route to the domain; Microsoft's 5.4.1 "Recipient address rejected"
        return "soft"
    if subject in (6, 7):
        return "blocked"
    if subject == 5 and not DEAD_ADDRESS_WORDS.search(text):
        return "blocked"
    return None
