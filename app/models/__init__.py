"""Every SQLAlchemy model, imported here so Alembic sees the whole schema."""

from app.models.automations import TRIGGER_TYPES, Automation, AutomationItem, AutomationTrigger
from app.models.base import Base
from app.models.campaigns import DELIVERABLE_STATES, Campaign, CampaignList, Deliverable
from app.models.contacts import Contact, ContactField, ContactFieldValue, ListMembership
from app.models.feeds import FEED_KINDS, SOURCE_KINDS, Feed, FeedItem, Source
from app.models.forms import Form, FormList
from app.models.identity import PLANS, Account, DeviceSession, PersonalToken, User, UserSession
from app.models.lists import ContactList
from app.models.oauth import OAuthAuthorizationCode, OAuthClient, OAuthToken
from app.models.suppressions import SUPPRESSION_REASONS, Suppression
from app.models.telemetry import TelemetrySetting
from app.models.watch_runs import (
    DELIVERY_STATES,
    RUN_STATES,
    TERMINAL_RUN_STATES,
    WatchActionDelivery,
    WatchActionRun,
)
from app.models.watches import ACTION_KINDS, Watch, WatchAction, WatchFeed
from app.models.webhooks import (
    ATTEMPT_STATES,
    EVENT_STATES,
    AccountWebhook,
    WebhookAttempt,
    WebhookEvent,
)

__all__ = [
    "ACTION_KINDS",
    "ATTEMPT_STATES",
    "DELIVERABLE_STATES",
    "DELIVERY_STATES",
    "EVENT_STATES",
    "FEED_KINDS",
    "PLANS",
    "RUN_STATES",
    "SOURCE_KINDS",
    "SUPPRESSION_REASONS",
    "TERMINAL_RUN_STATES",
    "TRIGGER_TYPES",
    "Account",
    "AccountWebhook",
    "Automation",
    "AutomationItem",
    "AutomationTrigger",
    "Base",
    "Campaign",
    "CampaignList",
    "Contact",
    "ContactField",
    "ContactFieldValue",
    "ContactList",
    "Deliverable",
    "DeviceSession",
    "Feed",
    "FeedItem",
    "Form",
    "FormList",
    "ListMembership",
    "OAuthAuthorizationCode",
    "OAuthClient",
    "OAuthToken",
    "PersonalToken",
    "Source",
    "Suppression",
    "TelemetrySetting",
    "User",
    "UserSession",
    "Watch",
    "WatchAction",
    "WatchActionDelivery",
    "WatchActionRun",
    "WatchFeed",
    "WebhookAttempt",
    "WebhookEvent",
]
