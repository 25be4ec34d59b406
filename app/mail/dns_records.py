"""The DNS records a sending domain publishes (SPF, DKIM from the domain's keys, DMARC) and whether they
are published as expected, checked on demand through a resolver the caller passes (the app's, or a
test's fake): Tidings itself never needs DNS to send."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import dns.asyncresolver
import dns.exception
import dns.resolver
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.kit.errors import DomainError
from app.mail.dkim_service import list_keys, normalize_domain
from app.models import Campaign

# The TXT strings published at a name ([] when there is none); raises DnsUnreachable when no answer
# could be had at all.
TxtResolver = Callable[[str], Awaitable[list[str]]]
DNS_TIMEOUT_SECONDS = 4.0
STANDBY = "standby (signs once the older key is deleted)"


class DnsUnreachable(Exception):
    """No resolver answered: the check cannot say anything about the records."""


@dataclass(frozen=True, slots=True)
class DnsRecord:
    kind: str  # spf, dkim, dmarc
    name: str
    value: str
    # What a published record must start with (SPF, DMARC: the relay and policy are the sender's
    # choice) or be equal to (DKIM: the key's own value).
    exact: bool
    note: str = ""

    @property
    def prefix(self) -> str:
        """`v=spf1`, `v=dkim1`, `v=dmarc1`: what tells this kind of record from other TXT records."""
        return self.value.split(";")[0].split()[0].lower()

    def is_one(self, published: str) -> bool:
        return published.strip().lower().startswith(self.prefix)

    def matches(self, published: str) -> bool:
        if self.exact:
            return "".join(published.split()) == "".join(self.value.split())
        return self.is_one(published)


@dataclass(frozen=True, slots=True)
class RecordCheck:
    record: DnsRecord
    state: str  # published, different, missing
    found: list[str]


def sending_domains(session: Session, account_id: int, user_email: str) -> list[str]:
    """The domains the account sends from: its campaigns' From addresses and its user's own address."""
    addresses = set(
        session.scalars(select(Campaign.from_email).where(Campaign.account_id == account_id).distinct())
    )
    addresses.add(user_email)
    domains = set()
    for address in addresses:
        with contextlib.suppress(DomainError):  # a From that names no domain has no records to show
            domains.add(normalize_domain(address.rpartition("@")[2]))
    return sorted(domains)


def records_for(session: Session, domain: str) -> list[DnsRecord]:
    domain = normalize_domain(domain)
    records = [
        DnsRecord(
            "spf",
            domain,
            "v=spf1 include:<your relay> -all",
            exact=False,
            note="which servers may send for the domain; one SPF record per name",
        )
    ]
    records.extend(
        DnsRecord(
            "dkim",
            key.dns_name,
            key.txt_value,
            exact=True,
            note=f"{key.algorithm} key, "
            + ("signing" if key.signing else "standby (signs once the older is deleted)"),
        )
        for key in list_keys(session, domain)
    )
    records.append(
        DnsRecord(
            "dmarc",
            f"_dmarc.{domain}",
            "v=DMARC1; p=none; rua=mailto:dmarc-reports@" + domain,
            exact=False,
            note="start with p=none, then quarantine and reject once the reports show your mail passing",
        )
    )
    return records


async def check_records(records: list[DnsRecord], resolve: TxtResolver) -> list[RecordCheck]:
    """Each record against what DNS publishes; DnsUnreachable when DNS cannot be reached."""
    found = await asyncio.gather(*(resolve(record.name) for record in records))
    checks = []
    for record, published in zip(records, found, strict=True):
        relevant = [text for text in published if record.is_one(text)]
        if any(record.matches(text) for text in relevant):
            state = "published"
        elif relevant:
            state = "different"
        else:
            state = "missing"
        checks.append(RecordCheck(record, state, relevant))
    return checks


async def system_txt_resolver(name: str) -> list[str]:
    """TXT records through the system's resolver (/etc/resolv.conf), each answer's strings joined."""
    try:
        resolver = dns.asyncresolver.Resolver()
        answer = await resolver.resolve(name, "TXT", lifetime=DNS_TIMEOUT_SECONDS)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return []
    except (dns.resolver.NoResolverConfiguration, dns.resolver.NoNameservers, dns.exception.Timeout) as exc:
        raise DnsUnreachable(f"DNS could not be reached from this server ({type(exc).__name__}).") from exc
    return [b"".join(record.strings).decode("utf-8", "replace") for record in answer]
