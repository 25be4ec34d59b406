"""The "Size caps" table of docs/compatibility.md is the code's: every row's number is the cap the code
applies (read from the constants and from the request models' own schemas), and every cap listed here
has its row."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from app.authroutes import account_pages
from app.authroutes import body as auth_body
from app.authroutes import specs as auth_specs
from app.authroutes.specs import SignUpEmailBody, UpdateUserBody
from app.authroutes.v1_auth import Credentials, DevicePollInput, SignupInput, TokenInput
from app.feeds import specs as feed_specs
from app.identity import accounts, passwords
from app.kit import v1_input, v1_request
from app.mail import field_service as fields
from app.mail import input as mail_input
from app.mail import request_input, webhook_service
from app.mail import specs as contacts
from app.mail.bounces import bounce_mailbox
from app.mail.bounces import reports as bounces
from app.mail.bounces.providers import ses
from app.mail.campaigns import campaign_rules
from app.mail.hosted_forms import hosted_form_service as hosted_forms
from app.mail.specs import (
    AutomationCreate,
    AutomationEmailCreate,
    AutomationEmailUpdate,
    CampaignCreate,
    CampaignUpdate,
    ListCreate,
    WebhookCreate,
)
from app.watches import specs as watch_specs

CAPS_DOC = Path(__file__).resolve().parent.parent / "docs" / "compatibility.md"


def cap(model: type[BaseModel], field: str, *path: str, key: str = "maxLength") -> Any:
    """`key` of `model.field`'s JSON schema, following `path` ("items") and any `$ref` or nullable
    `anyOf` on the way: the bound the model itself enforces."""
    schema = model.model_json_schema()
    definitions = schema.get("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while True:
            if "$ref" in node:
                node = definitions[node["$ref"].rsplit("/", 1)[1]]
            elif "anyOf" in node:
                node = next(member for member in node["anyOf"] if member.get("type") != "null")
            else:
                return node

    node = resolve(schema["properties"][field])
    for step in path:
        node = resolve(node[step])
    return node[key]


F, W = feed_specs, watch_specs
INTEGER_FIELDS = [
    cap(F.FeedFields, "poll_interval_seconds", key="maximum"),
    cap(F.CuratedFeedConfig, "retention_days", key="maximum"),
    cap(W.LogConfig, "digest_interval_seconds", key="maximum"),
    cap(W.WebhookConfig, "digest_interval_seconds", key="maximum"),
]
MAP_MODELS = [
    (F.SourceInput, "meta"),
    (F.SourceInput, "field_map"),
    (F.CuratedFeedConfig, "default_field_map"),
]

# Table row -> every value in the code that row stands for.
CODE: dict[str, list[Any]] = {
    "/v1 JSON body (bytes)": [v1_request.MAX_BODY_BYTES],
    "/v1 page size, `?limit=`": [v1_request.MAX_LIMIT],
    "/v1 integer behaviour values (`poll_interval_seconds`, `retention_days`, `digest_interval_seconds`)": [
        v1_input.MAX_INTEGER,
        *INTEGER_FIELDS,
    ],
    "feed `name` (characters)": [cap(F.FeedFields, "name")],
    "feed `kind` (characters)": [cap(F.FeedFields, "kind")],
    "sources of a feed, or of one source set": [
        F.MAX_SOURCES,
        cap(F.FeedFields, "sources", key="maxItems"),
        cap(F.SourceSetPayload, "sources", key="maxItems"),
    ],
    "`meta`, `field_map`, `default_field_map` entries": [F.MAX_MAP_ENTRIES],
    "`meta`, `field_map`, `default_field_map` keys (characters)": [F.MAX_MAP_KEY],
    "`meta`, `field_map`, `default_field_map` values (characters)": [F.MAX_MAP_VALUE],
    "RSS `url` (characters)": [cap(F.RssSpec, "url")],
    "RSS `name` (characters)": [cap(F.RssSpec, "name")],
    "board `query` (characters)": [cap(F.BoardFeedSpec, "query"), cap(F.BoardCommentSpec, "query")],
    "watch `name` (characters)": [cap(W.WatchInput, "name"), cap(W.WatchPatch, "name")],
    "actions of a watch": [W.MAX_ACTIONS, cap(W.WatchInput, "actions", key="maxItems")],
    "`feed_ids` of a watch": [
        W.MAX_WATCH_FEEDS,
        cap(W.WatchInput, "feed_ids", key="maxItems"),
        cap(W.WatchPatch, "feed_ids", key="maxItems"),
    ],
    "feed or action id in a request (characters)": [
        cap(W.WatchInput, "feed_ids", "items"),
        cap(W.ActionInput, "id"),
    ],
    "semantic_filter `instructions` (characters)": [
        W.MAX_FILTER_INSTRUCTIONS,
        cap(W.SemanticFilterConfig, "instructions"),
    ],
    "extract `fields`": [W.MAX_EXTRACT_FIELDS, cap(W.ExtractConfig, "fields", key="maxItems")],
    "extract field `name` (characters)": [cap(W.ExtractField, "name")],
    "extract field `description` (characters)": [cap(W.ExtractField, "description")],
    "extract `instructions` (characters)": [W.MAX_EXTRACT_INSTRUCTIONS, cap(W.ExtractConfig, "instructions")],
    "`include_fields` entries": [
        W.MAX_INCLUDE_FIELDS,
        cap(W.LogConfig, "include_fields", key="maxItems"),
        cap(W.WebhookConfig, "include_fields", key="maxItems"),
    ],
    "`include_fields` entry (characters)": [
        cap(W.LogConfig, "include_fields", "items"),
        cap(W.WebhookConfig, "include_fields", "items"),
    ],
    "webhook `url` (characters)": [cap(W.WebhookConfig, "url")],
    "webhook `headers`": [W.MAX_HEADERS],
    "webhook header name (characters)": [W.MAX_HEADER_NAME],
    "webhook header value (characters)": [W.MAX_HEADER_VALUE],
    "log `prefix` (characters)": [cap(W.LogConfig, "prefix")],
    "engine `kind` (characters)": [cap(W.EngineSpec, "kind")],
    "engine `model` (characters)": [cap(W.EngineSpec, "model")],
    "email API body (bytes)": [request_input.MAX_BODY_BYTES],
    "email API JSON nesting (levels)": [mail_input.MAX_JSON_DEPTH],
    "email API bracket nesting in form and query keys (levels)": [mail_input.MAX_NESTING],
    "campaign `title`, `subject`, `from_name`, `from_email` (characters)": [
        campaign_rules.MAX_SHORT,
        *(cap(model, name) for model in (CampaignCreate, CampaignUpdate) for name in ("title", "subject")),
        *(
            cap(model, name)
            for model in (CampaignCreate, CampaignUpdate)
            for name in ("from_name", "from_email")
        ),
        *(cap(model, "subject") for model in (AutomationEmailCreate, AutomationEmailUpdate)),
    ],
    "campaign and automation email `html` (characters)": [
        campaign_rules.MAX_HTML,
        *(cap(model, "html") for model in (CampaignCreate, AutomationEmailCreate, AutomationEmailUpdate)),
    ],
    "automation `title` (characters)": [cap(AutomationCreate, "title")],
    "contacts in one batch": [contacts.MAX_BATCH, cap(contacts.ContactBatch, "contacts", key="maxItems")],
    "contact `email` (characters)": [contacts.MAX_EMAIL_LENGTH, cap(contacts.ContactCreate, "email")],
    "contact `first_name`, `last_name` (characters)": [
        cap(model, name)
        for model in (contacts.ContactCreate, contacts.ContactUpdate, contacts.BatchContact)
        for name in ("first_name", "last_name")
    ],
    "contact `ip_address` (characters)": [contacts.MAX_IP_LENGTH],
    "contact field `name` (characters)": [cap(contacts.ContactFieldIn, "name")],
    "contact field `value` (characters)": [cap(contacts.ContactFieldIn, "value")],
    "contact fields of an account": [fields.MAX_FIELDS_PER_ACCOUNT],
    "list `name` (characters)": [cap(ListCreate, "name")],
    "hosted sign-up form body (bytes)": [hosted_forms.MAX_BODY_BYTES],
    "hosted sign-up form fields": [hosted_forms.MAX_FIELDS],
    "addresses in one `POST /suppressions`": [
        contacts.MAX_BATCH,
        cap(contacts.SuppressionCreate, "emails", key="maxItems"),
    ],
    "bounce webhook body (bytes)": [bounces.MAX_BODY_BYTES],
    "bounce reports in one request": [bounces.MAX_REPORTS],
    "bounce mailbox message read (bytes)": [bounce_mailbox.MAX_MESSAGE_BYTES],
    "provider webhook body (bytes)": [bounces.MAX_BODY_BYTES],
    "Amazon SNS signing certificate (bytes)": [ses.MAX_CERTIFICATE_BYTES],
    "account webhooks (`POST /webhooks`) of an account": [webhook_service.MAX_WEBHOOKS_PER_ACCOUNT],
    "account webhook `url` (characters)": [cap(WebhookCreate, "url"), contacts.MAX_WEBHOOK_URL],
    "account webhook `events` entries": [cap(WebhookCreate, "events", key="maxItems")],
    "account webhook `secret` (characters)": [cap(WebhookCreate, "secret")],
    "bounce report text fields (characters)": [
        cap(bounces.Report, "email"),
        cap(bounces.Report, "message_id"),
    ],
    "`username` (characters)": [accounts.USERNAME_MAX_LENGTH, cap(SignUpEmailBody, "username")],
    "`password` at sign-up (characters)": [passwords.MAX_PASSWORD_LENGTH, cap(SignUpEmailBody, "password")],
    "/api/auth body (bytes)": [auth_body.MAX_BODY_BYTES],
    "/api/auth `name`, `email`, `displayUsername` (characters)": [
        auth_specs.TEXT_MAX_LENGTH,
        *(cap(SignUpEmailBody, name) for name in ("name", "email", "displayUsername")),
        *(cap(UpdateUserBody, name) for name in ("name", "displayUsername")),
    ],
    "/api/auth `image` (characters)": [
        auth_specs.IMAGE_MAX_LENGTH,
        cap(SignUpEmailBody, "image"),
        cap(UpdateUserBody, "image"),
    ],
    "/v1/auth `password` (characters)": [cap(Credentials, "password"), cap(SignupInput, "password")],
    "/v1/auth `email`, `username`, `name` (characters)": [
        cap(Credentials, "email"),
        cap(Credentials, "username"),
        *(cap(SignupInput, name) for name in ("email", "username", "name")),
    ],
    "token `name` (characters)": [cap(TokenInput, "name"), account_pages.TOKEN_NAME_MAX_LENGTH],
    "device `device_code` (characters)": [cap(DevicePollInput, "device_code")],
}


def documented_caps() -> dict[str, int]:
    """The "Size caps" table: row name (first column) -> the number that starts its second column."""
    text = CAPS_DOC.read_text()
    section = text.split("\n## Size caps\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, int] = {}
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith("| what |"):
            continue
        name, value = (cell.strip() for cell in line.strip("|").split(" | ")[:2])
        number = re.match(r"[\d,]+", value)
        assert number is not None, f"no number in the row {name!r}: {value!r}"
        rows[name] = int(number.group().replace(",", ""))
    return rows


def test_every_documented_cap_is_the_codes() -> None:
    documented = documented_caps()
    assert set(documented) == set(CODE), (
        f"rows without code: {sorted(set(documented) - set(CODE))}; "
        f"caps without a row: {sorted(set(CODE) - set(documented))}"
    )
    wrong = {name: (number, CODE[name]) for name, number in documented.items() if set(CODE[name]) != {number}}
    assert not wrong, f"documented number vs the code's: {wrong}"


def test_the_map_caps_hold_for_every_string_map() -> None:
    # The three string maps share one validator: a map one entry over the cap is refused in each.
    too_many = {f"k{i}": "v" for i in range(feed_specs.MAX_MAP_ENTRIES + 1)}
    for model, name in MAP_MODELS:
        extra = {"spec": {"kind": "board_feed"}} if model is feed_specs.SourceInput else {}
        model.model_validate({**extra, name: dict(list(too_many.items())[:-1])})
        with pytest.raises(ValidationError):
            model.model_validate({**extra, name: too_many})
