"""The events as the email API's OpenAPI document describes them: its top-level `webhooks` (OpenAPI
3.1), one entry per event type, with the body's schema and the three Standard Webhooks headers. What
is sent is built in emit.py and campaign_finish.py; tests/mail/test_account_webhooks.py checks each
delivered body against these schemas."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.kit.openapi import EXTENSION
from app.mail.events.types import EventType


class EventContact(BaseModel):
    id: int
    email: str | None = Field(description="The contact's address when the event was written")


class ContactEventData(BaseModel):
    contact: EventContact
    campaign_id: int | None = Field(
        default=None, description="The campaign of the email (opened, clicked, bounced, complained)"
    )
    list_id: int | None = Field(default=None, description="The list joined (contact.subscribed)")


class ContactEvent(BaseModel):
    """A contact subscribed, unsubscribed, bounced, complained, opened or clicked."""

    type: Literal[
        "contact.subscribed",
        "contact.unsubscribed",
        "contact.bounced",
        "contact.complained",
        "contact.opened",
        "contact.clicked",
    ]
    timestamp: str = Field(description="When it happened (ISO 8601, UTC)")
    data: ContactEventData


class FinishedCampaign(BaseModel):
    id: int
    title: str
    sending_state: Literal["sent", "halted"]
    halt_reason: str | None


class CampaignEventData(BaseModel):
    campaign: FinishedCampaign


class CampaignEvent(BaseModel):
    """A campaign finished: every email settled, or it was halted."""

    type: Literal["campaign.sent"]
    timestamp: str = Field(description="When it finished (ISO 8601, UTC)")
    data: CampaignEventData


class ControlledCampaign(BaseModel):
    id: int
    title: str
    sending_state: str = Field(description="Its `sending_state` after the change")
    pending_count: int = Field(description="Its emails still queued or in flight")
    cancelled_count: int


class ControlledCampaignData(BaseModel):
    campaign: ControlledCampaign


class CampaignControlEvent(BaseModel):
    """Its sender paused, resumed or cancelled a campaign (an automation's email too)."""

    type: Literal["campaign.paused", "campaign.resumed", "campaign.cancelled"]
    timestamp: str = Field(description="When the change was made (ISO 8601, UTC)")
    data: ControlledCampaignData


SIGNATURE = (
    "Standard Webhooks: `webhook-signature` is `v1,` and the base64 HMAC-SHA256, keyed by the webhook's"
    " secret (base64 after `whsec_`), of `{webhook-id}.{webhook-timestamp}.{body}`. Answer 2xx to"
    " acknowledge; 5xx, 408, 429 and timeouts are retried (1 s, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h),"
    " any other answer fails the event."
)
HEADERS = [
    ("webhook-id", "The event's id (`msg_<n>`), the same at every retry: drop a repeat"),
    ("webhook-timestamp", "Unix seconds of this attempt; refuse one far from your clock"),
    ("webhook-signature", "`v1,<base64 HMAC-SHA256>`"),
]
WHEN = {
    EventType.CONTACT_SUBSCRIBED: "A contact joined a list.",
    EventType.CONTACT_UNSUBSCRIBED: "A contact unsubscribed.",
    EventType.CONTACT_BOUNCED: "An email to the contact hard-bounced (first report).",
    EventType.CONTACT_COMPLAINED: "The contact reported an email as spam (first report).",
    EventType.CONTACT_OPENED: "The contact opened an email (first open).",
    EventType.CONTACT_CLICKED: "The contact clicked a link of an email (first click).",
    EventType.CAMPAIGN_SENT: "A campaign finished sending, or was halted.",
    EventType.CAMPAIGN_PAUSED: "Its sender paused a campaign: no more of its emails start.",
    EventType.CAMPAIGN_RESUMED: "Its sender resumed a paused campaign.",
    EventType.CAMPAIGN_CANCELLED: "Its sender cancelled a campaign: what was not sent is cancelled.",
}
# The body each event type's webhook call carries (the contact events' otherwise).
BODIES: dict[EventType, type[BaseModel]] = {
    EventType.CAMPAIGN_SENT: CampaignEvent,
    EventType.CAMPAIGN_PAUSED: CampaignControlEvent,
    EventType.CAMPAIGN_RESUMED: CampaignControlEvent,
    EventType.CAMPAIGN_CANCELLED: CampaignControlEvent,
}


def events_openapi(schemas: dict[str, Any]) -> dict[str, Any]:
    """The `webhooks` object; the body models' schemas are added to `schemas` (components)."""
    ref = "#/components/schemas/{model}"
    models: tuple[type[BaseModel], ...] = (ContactEvent, CampaignEvent, CampaignControlEvent)
    for model in models:
        schema = model.model_json_schema(ref_template=ref)
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    described: dict[str, Any] = {}
    for event_type, when in WHEN.items():
        body = BODIES.get(event_type, ContactEvent)
        described[str(event_type)] = {
            "post": {
                "summary": f"{event_type} (beyond SendFox)",
                "description": f"{when} Sent to each account webhook that asked for it. {SIGNATURE}",
                **EXTENSION,
                "parameters": [
                    {
                        "name": name,
                        "in": "header",
                        "required": True,
                        "description": text,
                        "schema": {"type": "string"},
                    }
                    for name, text in HEADERS
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": ref.format(model=body.__name__)}}},
                },
                "responses": {"2XX": {"description": "Acknowledged: the event is delivered"}},
            }
        }
    return described
