"""Every SQLAlchemy model, imported here so Alembic sees the whole schema."""

from app.models.automations import TRIGGER_TYPES, Automation, AutomationItem, AutomationTrigger
from app.models.backfills import ActionBackfill
from app.models.base import Base
from app.models.campaigns import Campaign, CampaignList, Deliverable, LinkClick
from app.models.contacts import Contact, ContactField, ContactFieldValue, ListMembership
from app.models.dkim import DKIM_ALGORITHMS, DkimKey
from app.models.feeds import Feed, FeedItem, Source, SourceKind
from app.models.forms import Form, FormList
from app.models.identity import PAID_PLANS, Account, DeviceSession, PersonalToken, Plan, User, UserSession
from app.models.lists import ContactList
from app.models.oauth import OAuthAuthorizationCode, OAuthClient, OAuthToken
from app.models.provider_tokens import ProviderToken
from app.models.rejections import BlockedRejection
from app.models.states import (
    TERMINAL_RUN_STATES,
    ActionKind,
    BackfillState,
    CampaignState,
    DeliverableState,
    DeliveryState,
    EventState,
    RunState,
)
from app.models.suppressions import SUPPRESSION_REASONS, Suppression
from app.models.telemetry import TelemetrySetting
from app.models.watch_runs import WatchActionDelivery, WatchActionRun
from app.models.watches import Watch, WatchAction, WatchFeed
from app.models.webhooks import (
    AccountWebhook,
    WebhookAttempt,
    WebhookEvent,
)

__all__ = [
    "DKIM_ALGORITHMS",
    "PAID_PLANS",
    "SUPPRESSION_REASONS",
    "TERMINAL_RUN_STATES",
    "TRIGGER_TYPES",
    "Account",
    "AccountWebhook",
    "ActionBackfill",
    "ActionKind",
    "Automation",
    "AutomationItem",
    "AutomationTrigger",
    "BackfillState",
    "Base",
    "BlockedRejection",
    "Campaign",
    "CampaignList",
    "CampaignState",
    "Contact",
    "ContactField",
    "ContactFieldValue",
    "ContactList",
    "Deliverable",
    "DeliverableState",
    "DeliveryState",
    "DeviceSession",
    "DkimKey",
    "EventState",
    "Feed",
    "FeedItem",
    "Form",
    "FormList",
    "LinkClick",
    "ListMembership",
    "OAuthAuthorizationCode",
    "OAuthClient",
    "OAuthToken",
    "PersonalToken",
    "Plan",
    "ProviderToken",
    "RunState",
    "Source",
    "SourceKind",
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
