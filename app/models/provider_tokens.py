"""Single-use tokens of signed provider webhooks (Mailgun's `signature.token`), remembered while their
signature is fresh, so a signature seen once cannot be sent again with another event."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class ProviderToken(Base):
    __tablename__ = "provider_tokens"
    # The purge deletes by signed_at, on every accepted webhook.
    __table_args__ = (Index("ix_provider_tokens_signed_at", "signed_at"),)

    # `mailgun`: the provider whose signature carried the token.
    provider: Mapped[str] = mapped_column(String(16), primary_key=True)
    # Hex SHA-256 of the token: a fixed length whatever the provider sends, and no secret kept.
    token_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    # Hex SHA-256 of the body it came with: the provider's own retry (the same body) is answered again,
    # the same token with another body is refused.
    body_sha256: Mapped[str] = mapped_column(String(64))
    # The signature's timestamp: once it is stale the signature is refused anyway, and the row goes.
    signed_at: Mapped[datetime] = mapped_column()
