"""Response shapes of the email API (SendFox's shapes); they are also its OpenAPI schemas."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from app.kit.call_outcome import CallOutcome
from app.kit.time import iso
from app.kit.v1_wire import row_fields
from app.kit.wire_enum import inline_enum
from app.models import CampaignState

Timestamp = Annotated[datetime, PlainSerializer(iso, return_type=str)]
OptionalTimestamp = Annotated[datetime | None, PlainSerializer(iso, return_type=str | None)]

ItemT = TypeVar("ItemT")
ModelT = TypeVar("ModelT", bound=BaseModel)


class Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


def row_wire(model: type[ModelT], row: object, **values: Any) -> ModelT:
    """`model` of a row, validated: each field from the row's attribute of the same name, but those in
    `values` (what the row does not hold: counts, list ids, nested answers), as /v1's builders read them."""
    return model(**row_fields(model, row, **values))


class ContactOut(Out):
    id: int
    email: str
    first_name: str | None
    last_name: str | None
    ip_address: str | None
    unsubscribed_at: OptionalTimestamp
    created_at: Timestamp
    updated_at: Timestamp


class ContactListOut(Out):
    id: int
    name: str
    user_id: int
    contact_count: int = 0
    average_email_open_percent: float = 0.0
    average_email_click_percent: float = 0.0
    created_at: Timestamp
    updated_at: Timestamp


# Beyond SendFox (added fields; its clients ignore them): where sending stands, and the campaign's
# emails by where they are.
if TYPE_CHECKING:
    SendingState = CampaignState
    CallOutcomeField = CallOutcome
else:  # documented inline (app/kit/wire_enum.py)
    SendingState = inline_enum(CampaignState)
    CallOutcomeField = inline_enum(CallOutcome)

SendingStateField = Annotated[
    SendingState,
    Field(
        description="Beyond SendFox: `draft` (not asked to send), `queued` (scheduled, not started), "
        "`sending` (emails still queued or in flight), `sent` (every email sent, failed or cancelled), "
        "`halted` (stopped by its bounce or complaint rate), `paused` (paused by its sender: no email "
        "of it starts until it is resumed), `cancelled` (cancelled by its sender: what was not sent is "
        "counted in `cancelled_count`)."
    ),
]
RecipientsTotal = Annotated[
    int, Field(description="Beyond SendFox: the emails the campaign was fanned out into, one a recipient.")
]
PendingCount = Annotated[int, Field(description="Beyond SendFox: emails still queued or being sent.")]
FailedCount = Annotated[
    int, Field(description="Beyond SendFox: emails the mail server refused, or that failed to send.")
]
CancelledCount = Annotated[
    int,
    Field(
        description="Beyond SendFox: emails dropped unsent (the contact unsubscribed, bounced or was "
        "deleted, or the campaign halted)."
    ),
]


class CampaignOut(Out):
    id: int
    title: str
    subject: str
    html: str
    from_name: str
    from_email: str
    scheduled_at: OptionalTimestamp
    sent_at: OptionalTimestamp
    timezone: str | None
    lists: list[int] = []
    created_at: Timestamp
    updated_at: Timestamp
    sending_state: SendingStateField
    recipients_total: RecipientsTotal
    pending_count: PendingCount
    sent_count: Annotated[int, Field(description="Beyond SendFox: emails sent so far (as in its stats).")]
    failed_count: FailedCount
    cancelled_count: CancelledCount
    send_warning: Annotated[
        str | None,
        Field(
            description="Beyond SendFox: why this campaign's email may not reach the inbox, as the send "
            "worker found it (its From domain has no DKIM key: sent unsigned, or refused in production)."
        ),
    ] = None
    last_delivery_error: Annotated[
        str | None,
        Field(
            description="Beyond SendFox: the last error one of its emails met on the way to the mail "
            "server (a refused connection, the relay's 4xx or 5xx reply; not a recipient's bounce), "
            "kept after later emails go out; null while none has."
        ),
    ] = None
    last_delivery_error_at: Annotated[
        OptionalTimestamp, Field(description="Beyond SendFox: when last_delivery_error happened.")
    ] = None
    text: Annotated[
        str | None,
        Field(description="Beyond SendFox: the plain-text part as written; null: made from the html."),
    ] = None
    preheader: Annotated[
        str | None, Field(description="Beyond SendFox: the hidden preview text at the top of the html.")
    ] = None
    reply_to: Annotated[
        str | None, Field(description="Beyond SendFox: the Reply-To address; null: replies go to from_email.")
    ] = None
    track_opens: Annotated[
        bool,
        Field(
            description="Beyond SendFox: whether its emails carry the open pixel (unless the account "
            "turned it off for all its emails)."
        ),
    ] = True
    public_archive: Annotated[
        bool,
        Field(description="Beyond SendFox: listed, once sent, in the account's public archive."),
    ] = False


class CampaignCheckFindingOut(BaseModel):
    code: str
    severity: Annotated[
        str, Field(description="`error` blocks POST /campaigns/{id}/send; `warning` does not.")
    ]
    message: str


class CampaignCheckOut(BaseModel):
    findings: list[CampaignCheckFindingOut]
    sendable: Annotated[bool, Field(description="No finding is an `error`.")]


class CampaignStatsOut(BaseModel):
    sent_count: int
    unique_open_count: int
    unique_click_count: int
    unsubscribe_count: int
    bounce_count: int
    spam_count: int
    open_rate: float
    click_rate: float
    unsubscribe_rate: float
    bounce_rate: float
    spam_rate: float
    sending_state: SendingStateField
    recipients_total: RecipientsTotal
    pending_count: PendingCount
    failed_count: FailedCount
    cancelled_count: CancelledCount


class AutomationTriggerOut(Out):
    id: int
    automation_id: int
    type: str
    list_id: int | None
    campaign_id: int | None
    created_at: Timestamp
    updated_at: Timestamp


class AutomationCampaignOut(CampaignOut):
    stats: CampaignStatsOut | None = None


class AutomationItemOut(Out):
    id: int
    automation_id: int
    campaign_id: int
    delay_hours: int
    send_order: int
    campaign: AutomationCampaignOut
    created_at: Timestamp
    updated_at: Timestamp


class AutomationOut(Out):
    id: int
    user_id: int
    title: str
    active: bool
    created_at: Timestamp
    updated_at: Timestamp
    automation_triggers: list[AutomationTriggerOut]
    automation_items: list[AutomationItemOut]


class FormOut(Out):
    id: int
    title: str
    landing_page_id: int | None
    created_at: Timestamp
    updated_at: Timestamp


class UserOut(BaseModel):
    id: int
    name: str
    email: str
    contacts_count: int
    contact_limit: int
    created_at: Timestamp
    updated_at: Timestamp
    track_opens: Annotated[
        bool,
        Field(
            description="Beyond SendFox: whether the account's emails may carry the open pixel (false: "
            "none does, whatever each campaign says); set with PATCH /me."
        ),
    ] = True
    public_archive: Annotated[
        bool,
        Field(
            description="Beyond SendFox: whether the account's public archive is on (its sent campaigns "
            "that opted in, as pages and an Atom feed under /archive/{id}); set with PATCH /me."
        ),
    ] = False


class ContactFieldOut(Out):
    id: int
    user_id: int
    name: str
    created_at: Timestamp
    updated_at: Timestamp


class BatchResultOut(BaseModel):
    created: int
    updated: int


class SuppressionOut(Out):
    """Beyond SendFox: an address of the account's suppression list."""

    id: int
    email: str
    reason: Annotated[
        Literal["api", "bounce", "complaint"],
        Field(
            description="`api` (added by POST /suppressions), `bounce` (a hard bounce), `complaint` (spam)."
        ),
    ]
    created_at: Timestamp


class SuppressionsAddedOut(BaseModel):
    """Beyond SendFox: how many addresses POST /suppressions added, and how many were listed already."""

    created: int
    existing: int


class MessageOut(BaseModel):
    message: str


class ListUsage(BaseModel):
    type: str
    id: int
    title: str


class ErrorOut(BaseModel):
    message: str
    errors: dict[str, list[str]] | None = None


class ListInUseOut(BaseModel):
    message: str
    usages: list[ListUsage]


class ContactActivitySummary(BaseModel):
    last_sent_at: OptionalTimestamp
    last_opened_at: OptionalTimestamp
    last_clicked_at: OptionalTimestamp
    unsubscribed_at: OptionalTimestamp
    bounced_at: OptionalTimestamp


class DeliverableActivity(BaseModel):
    campaign_title: str
    campaign_id: int
    sent_at: OptionalTimestamp
    opened_at: OptionalTimestamp
    clicked_at: OptionalTimestamp
    bounced_at: OptionalTimestamp
    unsubscribed_at: OptionalTimestamp
    spam_at: OptionalTimestamp


class Page(BaseModel, Generic[ItemT]):
    """Laravel's length-aware paginator, as SendFox returns it."""

    current_page: int
    data: list[ItemT]
    first_page_url: str
    from_: int | None = Field(default=None, alias="from")
    last_page: int
    last_page_url: str
    next_page_url: str | None
    path: str
    per_page: int
    prev_page_url: str | None
    to: int | None
    total: int

    model_config = ConfigDict(populate_by_name=True)


class ContactActivityOut(BaseModel):
    contact: ContactActivitySummary
    deliverables: Page[DeliverableActivity]


class WebhookAnswer(BaseModel):
    """Reports applied, and those ignored: about no email sent, or no bounce, complaint or unsubscribe."""

    processed: int
    ignored: int


class WebhookOut(Out):
    """An account webhook (beyond SendFox). Its signing secret is shown once, when it is made (or
    rotated), never again."""

    id: str
    url: str
    events: list[str]
    created_at: Timestamp


class WebhookCreatedOut(WebhookOut):
    """The webhook just made, with its signing secret (Standard Webhooks): keep it, it is not shown
    again."""

    secret: str


class WebhookSecretOut(Out):
    """A webhook's new signing secret, shown this once. Until `previous_secret_expires_at` every
    delivery carries a signature by the previous secret too (`webhook-signature` holds both)."""

    id: str
    secret: str
    previous_secret_expires_at: Timestamp


class WebhookAttemptOut(Out):
    """One attempt to deliver one event (beyond SendFox): `GET /webhooks/{id}/deliveries`."""

    id: str
    event_id: str
    event_type: str
    attempt: int
    state: CallOutcomeField
    http_status: int | None
    error: str
    started_at: Timestamp
    completed_at: Timestamp


class CampaignPreviewOut(BaseModel):
    """Beyond SendFox: a campaign's email as the contact would get it (the signed links count nothing)."""

    subject: str
    from_: str = Field(alias="from")
    to: str
    html: str
    text: str

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class TestSendOut(BaseModel):
    """Beyond SendFox: the addresses the relay accepted a test email for."""

    sent_to: list[str]


class ReportCounts(BaseModel):
    sent: int = Field(description="Emails the relay accepted")
    failed: int = Field(description="Emails refused or given up on")
    opened: int = Field(description="First opens")
    clicked: int = Field(description="First clicks")
    unsubscribed: int
    bounced: int = Field(description="Hard bounces reported")
    complained: int = Field(description="Spam complaints")


class ReportHour(ReportCounts):
    start: Timestamp


class ReportDay(ReportCounts):
    date: str = Field(description="A day in the account's time zone (YYYY-MM-DD)")


class ReportDelivery(BaseModel):
    recipients: int
    sent: int
    failed: int
    cancelled: int
    pending: int


class ReportLink(BaseModel):
    url: str = Field(description="Where the link went, merge tags filled")
    clicks: int = Field(description="Every click of it, repeats included")
    unique_clickers: int = Field(description="The emails (recipients) that clicked it")


class CampaignReportOut(BaseModel):
    """Beyond SendFox: a campaign's events over time, hour by hour for 48 hours from the start of
    sending, then day by day, its clicks per link, and its delivery as it stands."""

    campaign_id: int
    sending_state: SendingStateField
    started_at: OptionalTimestamp
    timezone: str
    delivery: ReportDelivery
    links: list[ReportLink] = Field(description="Clicks per link, most clicked first (at most 500 links)")
    hourly: list[ReportHour]
    daily: list[ReportDay]
