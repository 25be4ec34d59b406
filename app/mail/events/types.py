"""The event types an account webhook can ask for, each a bit of `account_webhooks.event_mask`."""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    CONTACT_SUBSCRIBED = "contact.subscribed"
    CONTACT_UNSUBSCRIBED = "contact.unsubscribed"
    CONTACT_BOUNCED = "contact.bounced"
    CONTACT_COMPLAINED = "contact.complained"
    CONTACT_OPENED = "contact.opened"
    CONTACT_CLICKED = "contact.clicked"
    CAMPAIGN_SENT = "campaign.sent"
    # Added after the others (an event's bit is its position: stored masks keep their meaning).
    CAMPAIGN_PAUSED = "campaign.paused"
    CAMPAIGN_RESUMED = "campaign.resumed"
    CAMPAIGN_CANCELLED = "campaign.cancelled"

    @property
    def bit(self) -> int:
        return 1 << list(EventType).index(self)


def mask_of(types: list[EventType]) -> int:
    mask = 0
    for event_type in types:
        mask |= event_type.bit
    return mask
