"""The installation's telemetry choice (opt-in; nothing is sent while it is off)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped


class TelemetrySetting(Timestamped, Base):
    """The installation's telemetry choice: one row (id 1), absent until someone sets it."""

    __tablename__ = "telemetry_settings"

    id: Mapped[int] = mapped_column(primary_key=True)
    mode: Mapped[str] = mapped_column(String(16), default="off")
    # A random id sent with events instead of anything that names the installation or its users.
    installation_id: Mapped[str] = mapped_column(String(36))
    updated_by_user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), default=None
    )
    last_sent_at: Mapped[datetime | None] = mapped_column(default=None)
