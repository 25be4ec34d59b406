"""DKIM signing keys, one row a key: the operator's, per sending domain (`tidings dkim create`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.kit.time import utcnow
from app.models.base import Base

DKIM_ALGORITHMS = ("rsa", "ed25519")


class DkimKey(Base):
    __tablename__ = "dkim_keys"
    # A selector names one key of a domain in DNS (`<selector>._domainkey.<domain>`).
    __table_args__ = (UniqueConstraint("domain", "selector"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # Lowercase, international names in their ASCII (IDNA) form, as the DKIM-Signature's d= writes it.
    # (The unique constraint's index, domain first, finds a domain's keys.)
    domain: Mapped[str] = mapped_column(String(253))
    selector: Mapped[str] = mapped_column(String(63))
    # One of DKIM_ALGORITHMS.
    algorithm: Mapped[str] = mapped_column(String(16))
    # The private key (PKCS#8 PEM) encrypted with a key derived from TIDINGS_SECRET_KEY (a Fernet token).
    private_key: Mapped[str] = mapped_column(Text)
    # The p= value of the DNS record: the public key in base64 (SubjectPublicKeyInfo for RSA, the raw
    # 32 bytes for Ed25519, as RFC 6376 and RFC 8463 write them).
    public_key: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
