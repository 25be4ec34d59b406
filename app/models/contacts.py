"""Contacts, their list memberships, and custom field definitions and values."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped


class Contact(Timestamped, Base):
    __tablename__ = "contacts"
    __table_args__ = (
        UniqueConstraint("account_id", "email_key"),
        # Bounce and complaint reports name an address, not an account.
        Index("ix_contacts_email_key", "email_key"),
        # The listing and paging path: live contacts of one account in id order.
        Index(
            "ix_contacts_live_account_id",
            "account_id",
            "id",
            postgresql_where=text("deleted_at IS NULL"),
            sqlite_where=text("deleted_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    email: Mapped[str] = mapped_column(String(191))
    # Lowercased email: one contact per address per account, whatever its case.
    email_key: Mapped[str] = mapped_column(String(191))
    first_name: Mapped[str | None] = mapped_column(String(191), default=None)
    last_name: Mapped[str | None] = mapped_column(String(191), default=None)
    ip_address: Mapped[str | None] = mapped_column(String(45), default=None)
    unsubscribed_at: Mapped[datetime | None] = mapped_column(default=None)
    bounced_at: Mapped[datetime | None] = mapped_column(default=None)
    deleted_at: Mapped[datetime | None] = mapped_column(default=None)


class ListMembership(Base):
    __tablename__ = "list_memberships"

    list_id: Mapped[int] = mapped_column(ForeignKey("contact_lists.id", ondelete="CASCADE"), primary_key=True)
    contact_id: Mapped[int] = mapped_column(
        ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    created_at: Mapped[datetime] = mapped_column()


class ContactField(Timestamped, Base):
    """A custom field definition (SendFox's UserContactField)."""

    __tablename__ = "contact_fields"
    __table_args__ = (UniqueConstraint("account_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(191))


class ContactFieldValue(Base):
    __tablename__ = "contact_field_values"

    contact_id: Mapped[int] = mapped_column(ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True)
    field_id: Mapped[int] = mapped_column(
        ForeignKey("contact_fields.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    value: Mapped[str] = mapped_column(Text)
