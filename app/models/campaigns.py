"""Campaigns, the lists they go to, and deliverables (one row per campaign and contact: the send queue)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint, false, text, true
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Timestamped
from app.models.states import DeliverableState, StateColumn

# The partial indexes' predicates.
QUEUED_DELIVERABLES = f"state = '{DeliverableState.QUEUED}'"
SENDING_DELIVERABLES = f"state = '{DeliverableState.SENDING}'"
HELD_CAMPAIGNS = "held_at IS NOT NULL"


class Campaign(Timestamped, Base):
    __tablename__ = "campaigns"
    __table_args__ = (
        Index("ix_campaigns_account_id_id", "account_id", "id"),
        Index("uq_campaigns_source_key", "source_key", unique=True),
        # The campaigns the send claim skips: held ones, few at any time (app/mail/sending/queue.py).
        Index(
            "ix_campaigns_held",
            "id",
            postgresql_where=text(HELD_CAMPAIGNS),
            sqlite_where=text(HELD_CAMPAIGNS),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    # Set for an automation email: such a campaign never appears in GET /campaigns.
    automation_id: Mapped[int | None] = mapped_column(
        ForeignKey("automations.id", ondelete="CASCADE"), default=None, index=True
    )
    title: Mapped[str] = mapped_column(String(191))
    subject: Mapped[str] = mapped_column(String(191))
    html: Mapped[str] = mapped_column(Text)
    # The plain-text part as its author wrote it; null or empty: made from the html at each send.
    text: Mapped[str | None] = mapped_column(Text, default=None)
    # Hidden text at the top of the html that inboxes show after the subject.
    preheader: Mapped[str | None] = mapped_column(String(255), default=None)
    reply_to: Mapped[str | None] = mapped_column(String(191), default=None)
    # Whether its emails carry the open pixel (and the account's own switch must allow it too).
    track_opens: Mapped[bool] = mapped_column(server_default=true())
    # Listed in its account's public archive once sent (when the account has one).
    public_archive: Mapped[bool] = mapped_column(server_default=false())
    from_name: Mapped[str] = mapped_column(String(191))
    from_email: Mapped[str] = mapped_column(String(191))
    timezone: Mapped[str | None] = mapped_column(String(64), default=None)
    scheduled_at: Mapped[datetime | None] = mapped_column(default=None, index=True)
    sent_at: Mapped[datetime | None] = mapped_column(default=None)
    # When the last of its emails left the queue (sent, failed or cancelled) or it was halted: the
    # moment of its `campaign.sent` event, set once.
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    deleted_at: Mapped[datetime | None] = mapped_column(default=None)
    # Set when sending stopped by itself (bounce rate); its queued emails are cancelled.
    halted_at: Mapped[datetime | None] = mapped_column(default=None)
    halt_reason: Mapped[str | None] = mapped_column(String(255), default=None)
    # Why its email may not reach the inbox, as the send worker found it (its From domain had no DKIM
    # key: sent unsigned, or refused in production); shown in the campaign's view.
    send_warning: Mapped[str | None] = mapped_column(String(255), default=None)
    # Set while no email of it may start: paused by its sender, or cancelled (then for good). Workers
    # skip its queued emails and put back the ones they claimed but had not started.
    held_at: Mapped[datetime | None] = mapped_column(default=None)
    # Set when its sender cancelled it: what was not sent is cancelled, and it never sends again.
    cancelled_at: Mapped[datetime | None] = mapped_column(default=None)
    # Set for a campaign a watch's `email` action made: the key of the runs it carries (unique), so a
    # retry of those runs finds it instead of making another (app/mail/newsletter_service.py).
    source_key: Mapped[str | None] = mapped_column(String(64), default=None)
    # The last error the relay (or the outbox) gave one of its emails, and when: written only when a
    # send fails or is put off for a retry, never on the path of a sent email; bounces are the
    # recipients' and are counted, not kept here.
    last_delivery_error: Mapped[str | None] = mapped_column(Text, default=None)
    last_delivery_error_at: Mapped[datetime | None] = mapped_column(default=None)


class CampaignList(Base):
    __tablename__ = "campaign_lists"

    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True)
    list_id: Mapped[int] = mapped_column(
        ForeignKey("contact_lists.id", ondelete="CASCADE"), primary_key=True, index=True
    )


class Deliverable(Timestamped, Base):
    __tablename__ = "deliverables"
    __table_args__ = (
        UniqueConstraint("campaign_id", "contact_id"),
        # The queue: workers take due `queued` rows oldest first.
        Index(
            "ix_deliverables_queued",
            "send_after",
            "id",
            postgresql_where=text(QUEUED_DELIVERABLES),
            sqlite_where=text(QUEUED_DELIVERABLES),
        ),
        Index("ix_deliverables_contact_id", "contact_id"),
        # Has the campaign emails still to settle? (when it finished: app/mail/events/campaign_finish.py)
        Index(
            "ix_deliverables_unsettled",
            "campaign_id",
            postgresql_where=text("state IN ('queued', 'sending')"),
            sqlite_where=text("state IN ('queued', 'sending')"),
        ),
        # Leases to take back: only `sending` rows, few at any time.
        Index(
            "ix_deliverables_sending_lease",
            "lease_until",
            postgresql_where=text(SENDING_DELIVERABLES),
            sqlite_where=text(SENDING_DELIVERABLES),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    contact_id: Mapped[int] = mapped_column(ForeignKey("contacts.id", ondelete="CASCADE"))
    state: Mapped[DeliverableState] = mapped_column(
        StateColumn(DeliverableState, 16), default=DeliverableState.QUEUED
    )
    # Not sent before this moment (automation delays, retries, pacing). Always set: the queue's order.
    send_after: Mapped[datetime | None] = mapped_column(default=None)
    # A worker's claim on a `sending` row; past it the row goes back to the queue.
    lease_until: Mapped[datetime | None] = mapped_column(default=None)
    attempts: Mapped[int] = mapped_column(default=0)
    message_id: Mapped[str | None] = mapped_column(String(255), default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    sent_at: Mapped[datetime | None] = mapped_column(default=None)
    opened_at: Mapped[datetime | None] = mapped_column(default=None)
    clicked_at: Mapped[datetime | None] = mapped_column(default=None)
    bounced_at: Mapped[datetime | None] = mapped_column(default=None)
    unsubscribed_at: Mapped[datetime | None] = mapped_column(default=None)
    spam_at: Mapped[datetime | None] = mapped_column(default=None)


class LinkClick(Base):
    """One click of a tracked link (every click, not only an email's first): the clicks per link of
    the campaign's report. The URL is the one the reader went to, merge tags filled."""

    __tablename__ = "link_clicks"
    __table_args__ = (Index("ix_link_clicks_campaign_id", "campaign_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    deliverable_id: Mapped[int] = mapped_column(ForeignKey("deliverables.id", ondelete="CASCADE"), index=True)
    url: Mapped[str] = mapped_column(Text)
    clicked_at: Mapped[datetime]
