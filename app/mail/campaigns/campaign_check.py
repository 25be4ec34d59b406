"""The lint before send (`GET /campaigns/{id}/check`, and the same checks at `POST /campaigns/{id}/send`):
what would make a campaign's email fail authentication, get clipped or read badly. Each finding has a
code, a severity and a sentence; `error` findings block the send, `warning` ones do not.

- `dkim_key_missing`: the From domain has no DKIM key of Tidings'. An error under TIDINGS_ENV=production
  (unless TIDINGS_RELAY_SIGNS says the relay signs), else a warning.
- `link_unparseable` (error): an http(s) link that is no URL (no host, a broken IPv6 literal).
- `html_clipped` (warning): the html is over Gmail's 102 KB clipping limit.
- `text_part_empty` (warning): the html has no text for the plain-text part (an image-only email).
- `merge_tag_unknown` (warning): a merge tag without fallback that no field of the account fills.
- `image_alt_missing` (warning): an image without an alt attribute (alt="" marks a decorative one).

When DNS answers (within DNS_CHECK_SECONDS, through the resolver the caller passes), the check also
reads the From domain's records (dns_records.py), all warnings:

- `spf_missing`, `dmarc_missing`: the domain publishes no SPF (`v=spf1`) or DMARC (`v=DMARC1`) record.
- `dkim_record_missing`, `dkim_record_different`: a key of the domain's is not in DNS under its selector,
  or a different one is (its signatures then fail).
- `spf_not_aligned`: the envelope sender's domain (TIDINGS_BOUNCE_DOMAIN) does not align with the From
  domain (relaxed: sharing the parent domain; strict, when DMARC says `aspf=s`: equal), so SPF cannot
  pass DMARC and DKIM alone carries it. Without a bounce domain the envelope sender is the From address.

Those run for the check only, not at send: a send never waits on DNS, and DNS that does not answer says
nothing about the records. DKIM alignment needs no lookup: Tidings signs with `d=` the From domain.

Every email carries an unsubscribe link (render.py adds a footer when `{{ unsubscribe_url }}` is absent)
and a plain-text part made from the html, so neither can be missing.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.config import Settings
from app.kit.errors import DomainError, ValidationFailed
from app.mail.dns_records import DnsRecord, DnsUnreachable, TxtResolver, check_records, records_for
from app.mail.sending.render import HREF, MERGE_TAG, STANDARD_FIELDS, UNSUBSCRIBE_TAG, html_to_text
from app.models import Campaign, ContactField, DkimKey

Severity = Literal["error", "warning"]
# Gmail clips an email's html past 102 KB ("[Message clipped]"), hiding the rest and the unsubscribe link.
GMAIL_CLIP_BYTES = 102 * 1024
IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
ALT = re.compile(r"""\balt\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)
# A link's address as html_to_text writes it, "(https://...)": no words for a reader.
URL_IN_TEXT = re.compile(r"\(?\b[a-z][a-z0-9+.-]*:\S+\)?", re.IGNORECASE)
# What to look at in at most this many links and images (a huge html is already a finding of its own).
MAX_ITEMS = 1000
# The check's DNS lookups get this long, all together: it answers without them rather than late.
DNS_CHECK_SECONDS = 2.0
STRICT_SPF = re.compile(r"(?:^|;)\s*aspf\s*=\s*s\s*(?:;|$)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    severity: Severity
    message: str


@dataclass(frozen=True, slots=True)
class SigningPolicy:
    """What the operator said about signing: whether the relay signs itself (TIDINGS_RELAY_SIGNS), and
    whether email that would go out unsigned is refused (TIDINGS_ENV=production, unless it signs)."""

    relay_signs: bool = False
    refuse_unsigned: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> SigningPolicy:
        return cls(settings.relay_signs, settings.env == "production" and not settings.relay_signs)


def unsigned_sentence(domain: str, *, refused: bool) -> str:
    """What the campaign's view and the worker's log say of a From domain without a key."""
    if refused:
        return (
            f"not sent: {domain} has no DKIM key, and unsigned email is refused under TIDINGS_ENV=production "
            f"(tidings dkim create --domain {domain}, or TIDINGS_RELAY_SIGNS=true if the relay signs)"
        )[:255]
    return (
        f"sent unsigned: {domain} has no DKIM key, so its email fails DMARC alignment through DKIM "
        f"(tidings dkim create --domain {domain})"
    )[:255]


def note_send_warning(session: Session, campaign_id: int, sentence: str) -> None:
    """Keep the first warning on the campaign, for its view."""
    session.execute(
        update(Campaign)
        .where(Campaign.id == campaign_id, Campaign.send_warning.is_(None))
        .values(send_warning=sentence)
        .execution_options(synchronize_session=False)
    )


def from_domain(from_email: str) -> str:
    return from_email.rpartition("@")[2].strip().lower()


def check_campaign(
    session: Session, account_id: int, campaign: Campaign, policy: SigningPolicy
) -> list[Finding]:
    """Every finding about the campaign, errors first."""
    findings = [
        *_signing(session, campaign.from_email, policy),
        *_links(campaign.html),
        *_size_and_text(campaign.html),
        *_merge_tags(session, account_id, campaign.subject, campaign.html),
        *_images(campaign.html),
    ]
    return sorted(findings, key=lambda finding: finding.severity != "error")


def refuse_serious_findings(
    session: Session, account_id: int, campaign: Campaign, policy: SigningPolicy
) -> None:
    """At send: 400 (as the send route's other refusals) naming each `error` finding by its code;
    warnings let the send go on."""
    errors: dict[str, list[str]] = {}
    for finding in check_campaign(session, account_id, campaign, policy):
        if finding.severity == "error":
            errors.setdefault(finding.code, []).append(finding.message)
    if errors:
        raise ValidationFailed(errors, status=400)


def _signing(session: Session, from_email: str, policy: SigningPolicy) -> list[Finding]:
    domain = from_domain(from_email)
    if policy.relay_signs or not domain:
        return []
    if session.scalar(select(DkimKey.id).where(DkimKey.domain == domain).limit(1)) is not None:
        return []
    refused = policy.refuse_unsigned
    sentence = (
        f"{domain} has no DKIM key: "
        + (
            "unsigned email is refused under TIDINGS_ENV=production"
            if refused
            else "its email goes out unsigned"
        )
        + f" and fails DMARC at Gmail and Yahoo. Run `tidings dkim create --domain {domain}` and publish "
        "the record it prints (or set TIDINGS_RELAY_SIGNS=true if the relay signs for the domain)."
    )
    return [Finding("dkim_key_missing", "error" if refused else "warning", sentence)]


def _links(html: str) -> list[Finding]:
    findings = []
    for match in list(HREF.finditer(html))[:MAX_ITEMS]:
        href = MERGE_TAG.sub("x", match.group(3)).strip()
        if not href.lower().startswith(("http://", "https://")):
            continue
        try:
            host = urlsplit(href).hostname
        except ValueError:
            host = None
        if not host:
            shown = match.group(3).strip()[:100]
            findings.append(
                Finding("link_unparseable", "error", f"The link {shown!r} is not a URL a reader can open.")
            )
    return findings


def _size_and_text(html: str) -> list[Finding]:
    findings = []
    size = len(html.encode("utf-8"))
    if size > GMAIL_CLIP_BYTES:
        findings.append(
            Finding(
                "html_clipped",
                "warning",
                f"The html is {size // 1024} KB: Gmail clips email past 102 KB, hiding the rest and the "
                "unsubscribe link (tracked links make it longer still).",
            )
        )
    if not any(character.isalpha() for character in URL_IN_TEXT.sub("", html_to_text(html))):
        findings.append(
            Finding(
                "text_part_empty",
                "warning",
                "The html has no text, so the plain-text part is empty: image-only email reads badly and "
                "scores worse with spam filters.",
            )
        )
    return findings


def _merge_tags(session: Session, account_id: int, subject: str, html: str) -> list[Finding]:
    used = {
        match.group(1).strip().lower()
        for source in (subject, html)
        for match in MERGE_TAG.finditer(source)
        if match.group(2) is None  # a fallback fills it
    }
    unknown = used - set(STANDARD_FIELDS) - {UNSUBSCRIBE_TAG}
    if unknown:
        fields = session.scalars(select(ContactField.name).where(ContactField.account_id == account_id))
        unknown -= {name.lower() for name in fields}
    return [
        Finding(
            "merge_tag_unknown",
            "warning",
            f"The merge tag {{{{ {name} }}}} matches no field of the account and has no fallback: it "
            f'renders empty (add the field, or write {{{{ {name} | "fallback" }}}}).',
        )
        for name in sorted(unknown)
    ]


def _images(html: str) -> list[Finding]:
    missing = sum(1 for tag in IMG.findall(html)[:MAX_ITEMS] if not _has_alt(tag))
    if not missing:
        return []
    return [
        Finding(
            "image_alt_missing",
            "warning",
            f"{missing} image{'s' if missing > 1 else ''} without alt text: readers with images off (and "
            "the plain-text part) see nothing in their place.",
        )
    ]


def _has_alt(tag: str) -> bool:
    # alt="" is a deliberate choice (a spacer, a decorative image), not a missing text.
    return ALT.search(tag) is not None


def published_records(session: Session, from_email: str) -> list[DnsRecord]:
    """The records the From domain should publish (SPF first, its DKIM keys', DMARC); none for a From
    that names no usable domain."""
    try:
        return records_for(session, from_domain(from_email))
    except DomainError:
        return []


async def dns_findings(records: list[DnsRecord], bounce_domain: str, resolve: TxtResolver) -> list[Finding]:
    """What DNS says of `records` (published_records), or nothing when it does not answer in time."""
    if not records:
        return []
    try:
        checks = await asyncio.wait_for(check_records(records, resolve), DNS_CHECK_SECONDS)
    except (DnsUnreachable, TimeoutError):
        return []
    domain = records[0].name
    findings = []
    strict_spf = False
    for check in checks:
        record, state = check.record, check.state
        if record.kind == "dmarc" and state != "missing":
            strict_spf = any(STRICT_SPF.search(text) for text in check.found)
        if state == "published":
            continue
        if record.kind == "spf":
            sentence = f"{domain} publishes no SPF record: add the TXT record `v=spf1 include:<relay> -all`."
            findings.append(Finding("spf_missing", "warning", sentence))
        elif record.kind == "dmarc":
            sentence = (
                f"{domain} publishes no DMARC record (TXT at _dmarc.{domain}): Gmail and Yahoo require one "
                f"of bulk senders; start with `v=DMARC1; p=none; rua=mailto:dmarc-reports@{domain}`."
            )
            findings.append(Finding("dmarc_missing", "warning", sentence))
        elif state == "missing":
            sentence = f"The DKIM record {record.name} is not published: signatures with its key fail."
            findings.append(Finding("dkim_record_missing", "warning", sentence))
        else:
            sentence = (
                f"The DKIM record at {record.name} is not the key's (`tidings dkim show --domain {domain}` "
                "prints the right one): signatures with the key fail."
            )
            findings.append(Finding("dkim_record_different", "warning", sentence))
    if bounce_domain and not spf_aligned(bounce_domain.lower(), domain, strict=strict_spf):
        sentence = (
            f"The envelope sender's domain {bounce_domain} (TIDINGS_BOUNCE_DOMAIN) does not align with "
            f"{domain}{' under its DMARC record (aspf=s)' if strict_spf else ''}: SPF cannot pass DMARC, "
            "so DKIM alone carries it. Use a subdomain of the From domain as the bounce domain."
        )
        findings.append(Finding("spf_not_aligned", "warning", sentence))
    return findings


def spf_aligned(envelope_domain: str, domain: str, *, strict: bool) -> bool:
    """DMARC's SPF alignment of the envelope sender's domain with the From domain. Relaxed alignment
    compares organizational domains; without the public suffix list, a domain's is taken as itself
    less its first label when it has three or more (news.example.com and bounces.example.com align;
    example.co.uk is misjudged as its own organization's parent, a warning too few at worst)."""
    if strict:
        return envelope_domain == domain

    def organization(name: str) -> str:
        labels = name.split(".")
        return ".".join(labels[1:]) if len(labels) >= 3 else name

    mine, theirs = organization(envelope_domain), organization(domain)
    return mine == theirs or mine.endswith("." + theirs) or theirs.endswith("." + mine)
