"""Contacts, their list memberships, and custom field definitions and values."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    func,
    literal_column,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped

# contact_search_text() below, in PostgreSQL's words.
SEARCH_TEXT_AS_STORED = (
    "((((email_key::text || ' '::text) || COALESCE(lower(first_name::text), ''::text)) || ' '::text)"
    " || COALESCE(lower(last_name::text), ''::text))"
)


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
        # A search by part of an address or name (LIKE '%...%' on contact_search_text()) finds its
        # candidates by their trigrams (pg_trgm) instead of reading every contact of the account.
        # PostgreSQL only (SQLite reads the account's contacts). The expression is written as
        # PostgreSQL gives it back, so that comparing the models with the database sees it unchanged.
        Index(
            "ix_contacts_search",
            literal_column(SEARCH_TEXT_AS_STORED).label("search_text"),
            postgresql_using="gin",
            postgresql_ops={"search_text": "gin_trgm_ops"},
        ).ddl_if(dialect="postgresql"),
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


def contact_search_text() -> ColumnElement[str]:
    """What a contact search looks in: the address, first name and last name, lowercased, a space
    between (so "ann smith" finds Ann Smith). Constants are written in the SQL, never bound, so that
    PostgreSQL matches the expression to ix_contacts_search's."""

    def lowered(name: Any) -> ColumnElement[str]:
        return func.coalesce(func.lower(name), literal_column("''"))

    space: ColumnElement[str] = literal_column("' '")
    return Contact.email_key + space + lowered(Contact.first_name) + space + lowered(Contact.last_name)


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
