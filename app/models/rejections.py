"""Refusals aimed at the sender rather than the address (a `blocked` bounce: authentication, policy,
reputation, content): recorded, counted per receiving domain, and never a reason to suppress."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base


class BlockedRejection(Base):
    __tablename__ = "blocked_rejections"
    # The campaign's stop rule and its view count them per campaign and receiving domain.
    __table_args__ = (Index("ix_blocked_rejections_campaign_domain", "campaign_id", "receiving_domain"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    # One a deliverable: a repeated report (providers retry) is not a second refusal.
    deliverable_id: Mapped[int] = mapped_column(
        ForeignKey("deliverables.id", ondelete="CASCADE"), unique=True
    )
    # The lowercased domain of the recipient's address: the receiver that refused.
    receiving_domain: Mapped[str] = mapped_column(String(191))
    # The RFC 3463 status (5.7.26), when the refusal carried one.
    status: Mapped[str | None] = mapped_column(String(16), default=None)
    # The receiver's words, cut to 500 characters.
    detail: Mapped[str | None] = mapped_column(String(500), default=None)
    created_at: Mapped[datetime] = mapped_column()
