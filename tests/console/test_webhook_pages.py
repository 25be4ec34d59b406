"""The console's Webhooks in-process: an endpoint made through the email API's service, its secret shown
once, a test event queued for it alone, another account's endpoint not found, a free plan refused."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import WebhookEvent
from tests.authroutes.conftest import SAME_ORIGIN, Person, sign_in


def test_add_an_endpoint_see_its_secret_once_and_queue_a_test_event(console: TestClient, db: Session) -> None:
    refused = console.post("/console/webhooks", data={"url": "https://hooks.example.com/x"})
    assert refused.status_code == 422
    assert "events: The events field must have at least 1 items." in refused.text

    made = console.post(
        "/console/webhooks",
        data={"url": "https://hooks.example.com/x", "events": ["contact.subscribed", "campaign.sent"]},
    )
    assert made.status_code == 201, made.text
    secret = made.text.split('id="secret-value">', 1)[1].split("<", 1)[0]
    assert secret.startswith("whsec_")
    listed = console.get("/console/webhooks")
    assert "https://hooks.example.com/x" in listed.text and secret not in listed.text
    hook_path = made.text.split('<a href="/console/webhooks/', 1)[1].split('"', 1)[0]
    page = console.get(f"/console/webhooks/{hook_path}")
    assert "Nothing delivered yet." in page.text and secret not in page.text

    sent = console.post(f"/console/webhooks/{hook_path}/test")
    assert sent.status_code == 303
    assert "A test contact.subscribed event is queued" in console.get(sent.headers["location"]).text
    events = db.scalars(select(WebhookEvent).where(WebhookEvent.webhook_id == hook_path)).all()
    assert [(e.type, '"test":true' in e.body) for e in events] == [("contact.subscribed", True)]

    assert console.post(f"/console/webhooks/{hook_path}/delete").status_code == 303
    gone = console.get(f"/console/webhooks/{hook_path}")
    assert gone.status_code == 404 and "Webhook not found." in gone.text
    assert gone.headers["content-type"].startswith("text/html")


def test_a_free_plan_is_told_why(
    make_client: Callable[..., TestClient], make_person: Callable[..., Person]
) -> None:
    client = make_client()
    sign_in(client, make_person("free_user", plan="free"))
    client.headers.update(SAME_ORIGIN)
    page = client.get("/console/webhooks")
    assert page.status_code == 403
    assert "API access requires a paid plan (lifetime or empire):" in page.text
