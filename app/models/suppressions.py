"""The suppression list: addresses an account never sends to again, whichever contact row carries them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base

SUPPRESSION_REASONS = ("api", "bounce", "complaint")


class Suppression(Base):
    __tablename__ = "suppressions"
    # The fan-out, the automation queue and the claim look an address up by (account_id, email_key).
    __table_args__ = (UniqueConstraint("account_id", "email_key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    email: Mapped[str] = mapped_column(String(191))
    # Lowercased email, as contacts.email_key: the same address whatever its case.
    email_key: Mapped[str] = mapped_column(String(191))
    # Why the address is on the list: `api` (added by POST /suppressions), `bounce` (a hard bounce),
    # `complaint` (a spam complaint).
    reason: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column()
