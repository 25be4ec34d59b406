"""Hosted sign-up forms and the lists they subscribe to."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped


class Form(Timestamped, Base):
    __tablename__ = "forms"

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(String(191))
    landing_page_id: Mapped[int | None] = mapped_column(default=None)
    deleted_at: Mapped[datetime | None] = mapped_column(default=None)


class FormList(Base):
    __tablename__ = "form_lists"

    form_id: Mapped[int] = mapped_column(ForeignKey("forms.id", ondelete="CASCADE"), primary_key=True)
    list_id: Mapped[int] = mapped_column(
        ForeignKey("contact_lists.id", ondelete="CASCADE"), primary_key=True, index=True
    )
