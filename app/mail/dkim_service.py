"""The operator's DKIM keys (`tidings dkim create|list|show|delete`): the rules and SQL.

A key belongs to a sending domain, not to an account: every email whose From address is in that
domain is signed with it, whichever account sends it (app/mail/sending/dkim.py). A domain may hold
several keys under different selectors; per algorithm the oldest one signs, and a newer one waits
until it is deleted (rotation, see docs/deliverability.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.kit.errors import DomainError
from app.mail.sending.dkim import KeyBox, generate_key, txt_value
from app.models import DKIM_ALGORITHMS, DkimKey

LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
MAX_DOMAIN_LENGTH = 253
# A DNS TXT record holds strings of at most 255 bytes; a longer value is written as several.
TXT_STRING_MAX = 255


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A key as the operator sees it: where its DNS record goes, what it holds, and whether it signs."""

    domain: str
    selector: str
    algorithm: str
    created_at: datetime
    # The record's value (`v=DKIM1; k=rsa; p=...`).
    txt_value: str
    signing: bool

    @property
    def dns_name(self) -> str:
        return f"{self.selector}._domainkey.{self.domain}"

    def zone_line(self) -> str:
        """The record as a zone file writes it: its value cut into strings of 255 characters at most."""
        value = self.txt_value
        strings = " ".join(
            f'"{value[start : start + TXT_STRING_MAX]}"' for start in range(0, len(value), TXT_STRING_MAX)
        )
        return f"{self.dns_name}. IN TXT ( {strings} )"


def normalize_domain(domain: str) -> str:
    """`Exämple.COM.` -> `xn--exmple-cua.com`; a DomainError (exit 1) when it is not a domain name."""
    name = domain.strip().rstrip(".").lower()
    try:
        ascii_name = name.encode("idna").decode("ascii") if not name.isascii() else name
    except UnicodeError as exc:
        raise DomainError(400, f"{domain!r} is not a domain name.") from exc
    labels = ascii_name.split(".")
    if len(labels) < 2 or len(ascii_name) > MAX_DOMAIN_LENGTH or not all(LABEL.fullmatch(x) for x in labels):
        raise DomainError(400, f"{domain!r} is not a domain name (such as example.com).")
    return ascii_name


def normalize_selector(selector: str) -> str:
    name = selector.strip().lower()
    if not name or len(name) > 63 or not all(LABEL.fullmatch(label) for label in name.split(".")):
        raise DomainError(
            400,
            f"{selector!r} is not a selector: letters, digits and inner hyphens, at most 63 characters.",
        )
    return name


def default_selector(algorithm: str, now: datetime) -> str:
    """`tidings202611` (RSA) or `tidings202611ed` (Ed25519): the month tells keys apart at rotation."""
    return f"tidings{now:%Y%m}" + ("ed" if algorithm == "ed25519" else "")


def create_key(
    session: Session,
    secret_key: str,
    domain: str,
    *,
    selector: str | None,
    algorithm: str,
    now: datetime,
) -> KeyRecord:
    """A new key for the domain, its private half sealed with the secret key; returns its record."""
    if algorithm not in DKIM_ALGORITHMS:
        raise DomainError(400, f"The algorithm must be one of {', '.join(DKIM_ALGORITHMS)}.")
    domain = normalize_domain(domain)
    selector = normalize_selector(selector if selector is not None else default_selector(algorithm, now))
    taken = session.scalars(
        select(DkimKey.id).where(DkimKey.domain == domain, DkimKey.selector == selector)
    ).first()
    if taken is not None:
        raise DomainError(
            409, f"{domain} already has a key with the selector {selector}: choose another with --selector."
        )
    made = generate_key(algorithm)
    key = DkimKey(
        domain=domain,
        selector=selector,
        algorithm=algorithm,
        private_key=KeyBox(secret_key).seal(made.pem),
        public_key=made.public_key,
        created_at=now,
    )
    session.add(key)
    session.flush()
    return _records(session, domain, selector)[0]


def list_keys(session: Session, domain: str | None = None) -> list[KeyRecord]:
    return _records(session, normalize_domain(domain) if domain is not None else None)


def delete_key(session: Session, domain: str, selector: str) -> KeyRecord:
    """Deletes the key; its standby (a newer key of the same algorithm), if any, signs from now on."""
    domain, selector = normalize_domain(domain), normalize_selector(selector)
    found = _records(session, domain, selector)
    if not found:
        raise DomainError(404, f"{domain} has no key with the selector {selector}.")
    session.execute(delete(DkimKey).where(DkimKey.domain == domain, DkimKey.selector == selector))
    return found[0]


def _records(session: Session, domain: str | None, selector: str | None = None) -> list[KeyRecord]:
    query = select(DkimKey).order_by(DkimKey.domain, DkimKey.created_at, DkimKey.id)
    if domain is not None:
        query = query.where(DkimKey.domain == domain)
    keys = list(session.scalars(query))
    signing: set[tuple[str, str]] = set()
    records = []
    for key in keys:
        first = (key.domain, key.algorithm) not in signing
        signing.add((key.domain, key.algorithm))
        records.append(
            KeyRecord(
                key.domain,
                key.selector,
                key.algorithm,
                key.created_at,
                txt_value(key.algorithm, key.public_key),
                signing=first,
            )
        )
    return [record for record in records if selector is None or record.selector == selector]
