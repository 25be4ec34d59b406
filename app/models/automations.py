"""Automations (drip sequences): one trigger and an ordered list of emails."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped

TRIGGER_TYPES = ("apply_list", "open_campaign", "click_campaign")


class Automation(Timestamped, Base):
    __tablename__ = "automations"

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    title: Mapped[str] = mapped_column(String(191))
    active: Mapped[bool] = mapped_column(default=False)
    # When it was last switched off: switching it on again moves its queued emails on by the pause.
    paused_at: Mapped[datetime | None] = mapped_column(default=None)
    deleted_at: Mapped[datetime | None] = mapped_column(default=None)


class AutomationTrigger(Timestamped, Base):
    __tablename__ = "automation_triggers"

    id: Mapped[int] = mapped_column(primary_key=True)
    automation_id: Mapped[int] = mapped_column(ForeignKey("automations.id", ondelete="CASCADE"), index=True)
    type: Mapped[str] = mapped_column(String(32))
    list_id: Mapped[int | None] = mapped_column(
        ForeignKey("contact_lists.id", ondelete="SET NULL"), default=None, index=True
    )
    campaign_id: Mapped[int | None] = mapped_column(
        ForeignKey("campaigns.id", ondelete="SET NULL"), default=None, index=True
    )


class AutomationItem(Timestamped, Base):
    __tablename__ = "automation_items"

    id: Mapped[int] = mapped_column(primary_key=True)
    automation_id: Mapped[int] = mapped_column(ForeignKey("automations.id", ondelete="CASCADE"), index=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"), unique=True)
    delay_hours: Mapped[int] = mapped_column(default=24)
    send_order: Mapped[int] = mapped_column(default=1)
