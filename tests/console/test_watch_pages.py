"""The console's Newsletter from a feed and Watches in-process: the recipe saved as the watch
POST /v1/watches makes, its preview from the feed's items, a filter refused with the engine's reason
when none is set up, and the chain edited in place with the API's own messages."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import UTC, datetime

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.identity.principal import principal_of
from app.kit.ids import new_ulid
from app.mail.campaigns.campaign_service import create_campaign
from app.mail.list_service import make_list
from app.mail.specs import CampaignCreate
from app.models import Account, Campaign, FeedItem, User, WatchAction, WatchActionDelivery
from tests.authroutes.conftest import SAME_ORIGIN, Person, sign_in
from tests.fake_engine import FakeEngine


def _feed_with_items(client: TestClient, db: Session, person: Person, titles: list[str]) -> str:
    made = client.post(
        "/console/feeds/new",
        data={"name": "Blog", "source_kind": "rss", "url": "http://127.0.0.1:9/feed.xml", "action": "create"},
    )
    feed_id = made.headers["location"].rsplit("/", 1)[1]
    for number, title in enumerate(titles):
        db.add(
            FeedItem(
                id=new_ulid(),
                account_id=person.account_id,
                feed_id=feed_id,
                source_kind="rss",
                external_id=f"item-{number}",
                data={"title": title, "url": f"https://blog.example.com/{number}", "content": "Text"},
            )
        )
    db.flush()
    return feed_id


def test_without_an_engine_the_recipe_says_why_a_filter_cannot_be_added(console: TestClient) -> None:
    console.post(
        "/console/feeds/new",
        data={"name": "Blog", "source_kind": "rss", "url": "http://127.0.0.1:9/f", "action": "create"},
    )
    page = console.get("/console/newsletter").text
    assert "A filter cannot be added here:" in page and "TIDINGS_ENGINE_BASE_URL" in page
    assert 'name="instructions" aria-describedby="nl-engine-problem" disabled' in page


def test_build_preview_and_save_a_newsletter_then_edit_its_chain(
    make_client: Callable[..., TestClient], person: Person, db: Session, llm: FakeEngine
) -> None:
    client = make_client(outbound_allow_private=True, engine_base_url=llm.base_url)
    sign_in(client, person)
    client.headers.update(SAME_ORIGIN)
    feed_id = _feed_with_items(client, db, person, ["Rust 2.0 is out", "A cake recipe"])
    newsletter = make_list(db, person.account_id, person.user_id, "Readers")
    db.flush()
    form = {
        "name": "Rust digest",
        "feed_id": feed_id,
        "instructions": "Only posts about Rust",
        "threshold": "0.8",
        "list_ids": [str(newsletter.id)],
        "cadence": "daily",
        "mode": "draft",
        "subject": "",
        "template": "<ul>{% for item in items %}<li>{{ item.title }}</li>{% endfor %}</ul>",
    }
    preview = client.post("/console/newsletter", data={**form, "action": "preview"})
    assert preview.status_code == 200, preview.text
    assert "Preview from the 2 newest items" in preview.text
    assert "Rust digest: 2 new items" in preview.text
    assert "&lt;li&gt;A cake recipe&lt;/li&gt;" in preview.text  # inside the sandboxed frame's srcdoc

    refused = client.post("/console/newsletter", data={**form, "list_ids": ["999999"], "action": "create"})
    assert refused.status_code == 400 and "999999" in refused.text

    saved = client.post("/console/newsletter", data={**form, "action": "create"})
    assert saved.status_code == 303, saved.text
    watch_id = saved.headers["location"].rsplit("/", 1)[1]
    api = client.get(f"/v1/watches/{watch_id}").json()
    assert [a["kind"] for a in api["actions"]] == ["semantic_filter", "email"]
    email = api["actions"][1]
    assert email["config"]["delivery"] == "digest" and email["config"]["digest_interval_seconds"] == 86400
    assert email["config"]["mode"] == "draft" and email["config"]["list_ids"] == [newsletter.id]

    page = client.get(f"/console/watches/{watch_id}")
    assert page.status_code == 200, page.text
    assert '<svg class="chart"' in page.text and "Runs of semantic_filter" in page.text
    assert "Rust digest" in client.get("/console/watches").text

    filter_id = api["actions"][0]["id"]
    assert 'name="config.threshold" value="0.8"' in page.text  # each config is a form of its model's fields
    kept = {"config.engine.kind": "", "config.engine.model": "", "config.fetch_external_content": "on"}
    bad = client.post(
        f"/console/watches/{watch_id}/actions/{filter_id}",
        data={**kept, "config.instructions": "  ", "config.threshold": "2"},
    )
    assert bad.status_code == 400
    # The API's own messages, beside the fields they name, with what was typed kept.
    assert (
        f'id="{filter_id}-instructions-errors"' in bad.text
        and f'id="{filter_id}-threshold-errors"' in bad.text
    )
    assert "less than or equal to 1" in bad.text and 'name="config.threshold" value="2"' in bad.text

    log_form = {
        "kind": "log",
        "config.prefix": "[rust]",
        "config.delivery": "instant",
        "config.include_fields": "title\nurl",
    }
    assert client.post(f"/console/watches/{watch_id}/actions", data=log_form).status_code == 303
    log = client.get(f"/v1/watches/{watch_id}").json()["actions"][2]
    assert log["config"]["prefix"] == "[rust]" and log["config"]["include_fields"] == ["title", "url"]
    log_id = log["id"]
    assert (
        client.post(
            f"/console/watches/{watch_id}/actions/{log_id}/move", data={"direction": "up"}
        ).status_code
        == 303
    )
    kinds = [a["kind"] for a in client.get(f"/v1/watches/{watch_id}").json()["actions"]]
    assert kinds == ["semantic_filter", "log", "email"]
    assert client.post(f"/console/watches/{watch_id}/actions/{log_id}/delete").status_code == 303
    edited = client.post(
        f"/console/watches/{watch_id}/actions/{filter_id}",
        data={**kept, "config.instructions": "Rust only", "config.threshold": "0.5"},
    )
    assert edited.status_code == 303
    actions = client.get(f"/v1/watches/{watch_id}").json()["actions"]
    assert [a["kind"] for a in actions] == ["semantic_filter", "email"]
    assert actions[0]["config"]["instructions"] == "Rust only" and actions[0]["config"]["threshold"] == 0.5

    # A webhook's secrets are shown masked and sent back as shown: the chain service keeps the stored ones.
    hook = {
        "kind": "webhook",
        "config.url": "http://127.0.0.1:9/hook?token=s3cret",
        "config.method": "POST",
        "config.delivery": "instant",
        "config.headers": "Authorization: Bearer s3cret",
    }
    assert client.post(f"/console/watches/{watch_id}/actions", data=hook).status_code == 303
    hook_id = client.get(f"/v1/watches/{watch_id}").json()["actions"][2]["id"]
    page = client.get(f"/console/watches/{watch_id}").text
    assert "s3cret" not in page
    shown_url = re.search(rf'id="{hook_id}-url" name="config.url"[^>]*>([^<]*)</textarea>', page)
    shown_headers = re.search(rf'id="{hook_id}-headers" name="config.headers"[^>]*>([^<]*)</textarea>', page)
    assert shown_url and shown_headers
    resent = {
        "config.url": html.unescape(shown_url.group(1)),
        "config.method": "PUT",
        "config.delivery": "instant",
        "config.headers": html.unescape(shown_headers.group(1)),
    }
    assert client.post(f"/console/watches/{watch_id}/actions/{hook_id}", data=resent).status_code == 303
    stored = db.get_one(WatchAction, hook_id).config
    assert stored["method"] == "PUT" and stored["url"].endswith("token=s3cret")
    assert stored["headers"] == {"Authorization": "Bearer s3cret"}

    assert client.post(f"/console/watches/{watch_id}/delete").status_code == 303
    assert client.get(f"/v1/watches/{watch_id}").status_code == 404


def test_without_an_engine_the_watch_page_disables_the_kinds_that_need_one(
    console: TestClient, db: Session, person: Person
) -> None:
    made = console.post("/v1/watches", json={"name": "Log only", "actions": [{"kind": "log", "config": {}}]})
    assert made.status_code in (200, 201), made.text
    page = console.get(f"/console/watches/{made.json()['id']}").text
    for kind in ("semantic_filter", "extract"):
        assert f"A {kind} action cannot be added here:" in page and "TIDINGS_ENGINE_BASE_URL" in page
        assert f'<fieldset disabled aria-describedby="new-{kind}-engine">' in page
    assert "<fieldset><legend>The log action" in page and "<fieldset><legend>The webhook action" in page

    # The email kind's form: lists one per line, blank optional fields left to the model's defaults.
    readers = make_list(db, person.account_id, person.user_id, "Readers")
    email = {
        "kind": "email",
        "config.delivery": "digest",
        "config.digest_interval_seconds": "86400",
        "config.list_ids": f"{readers.id}\n",
        "config.subject": "",
        "config.template": "",
        "config.from_name": "",
        "config.from_email": "",
        "config.mode": "draft",
        "config.min_interval_seconds": "",
    }
    watch_id = made.json()["id"]
    refused = console.post(f"/console/watches/{watch_id}/actions", data={**email, "config.list_ids": "x"})
    assert refused.status_code == 400 and 'id="new-email-list_ids-errors"' in refused.text
    assert console.post(f"/console/watches/{watch_id}/actions", data=email).status_code == 303
    config = console.get(f"/v1/watches/{watch_id}").json()["actions"][1]["config"]
    assert config["list_ids"] == [readers.id] and config["mode"] == "draft" and config["subject"] is None
    assert config["min_interval_seconds"] == 0  # the model's default for a digest


def test_a_webhook_actions_deliveries_are_listed_and_a_watch_is_paused_and_resumed(
    console: TestClient, db: Session, person: Person
) -> None:
    hook = {"kind": "webhook", "config": {"url": "http://127.0.0.1:9/hook"}}
    made = console.post("/v1/watches", json={"name": "Hooked", "actions": [hook]}).json()
    watch_id, action_id = made["id"], made["actions"][0]["id"]
    moment = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    for state, status, error in (("succeeded", 204, ""), ("failed", 500, "HTTP 500 from the receiver")):
        db.add(
            WatchActionDelivery(
                id=new_ulid(),
                account_id=person.account_id,
                watch_id=watch_id,
                action_id=action_id,
                delivery="instant",
                method="POST",
                state=state,
                attempt=1,
                item_count=1,
                http_status=status,
                target_host="127.0.0.1:9",
                error=error,
                created_at=moment,
                completed_at=moment,
            )
        )
    db.flush()
    page = console.get(f"/console/watches/{watch_id}").text
    assert "Webhook deliveries, newest first" in page
    assert '<td class="state-ok">succeeded</td>\n<td>204</td>' in page
    assert '<td class="state-bad">failed</td>\n<td>500</td>' in page and "HTTP 500 from the receiver" in page

    # Pause and resume: PATCH /v1/watches/{id}'s `is_active`, through the same service.
    assert console.post(f"/console/watches/{watch_id}/active", data={"active": "false"}).status_code == 303
    assert console.get(f"/v1/watches/{watch_id}").json()["is_active"] is False
    assert "Resume watch" in console.get(f"/console/watches/{watch_id}").text
    assert console.post(f"/console/watches/{watch_id}/active", data={"active": "true"}).status_code == 303
    assert console.get(f"/v1/watches/{watch_id}").json()["is_active"] is True
    assert (
        console.post(
            "/console/watches/01ARZ3NDEKTSV4RRFFQ69G5FAV/active", data={"active": "true"}
        ).status_code
        == 404
    )


def test_a_draft_is_reviewed_and_sent_after_a_confirmation(
    console: TestClient, db: Session, person: Person
) -> None:
    readers = make_list(db, person.account_id, person.user_id, "Readers")
    user, account = db.get_one(User, person.user_id), db.get_one(Account, person.account_id)
    body = CampaignCreate(
        title="Rust digest",
        subject="Rust 2.0 is out",
        html="<p>Rust 2.0 is out</p><p><a href='{{ unsubscribe_url }}'>Unsubscribe</a></p>",
        from_name="Ada",
        from_email="ada@example.com",
        lists=[readers.id],
    )
    campaign_id = create_campaign(db, principal_of(user, account), body).id
    made = console.post("/v1/watches", json={"name": "Digest", "actions": [{"kind": "log", "config": {}}]})
    draft = f"/console/watches/{made.json()['id']}/campaigns/{campaign_id}"
    unknown_watch = console.get(f"/console/watches/01ARZ3NDEKTSV4RRFFQ69G5FAV/campaigns/{campaign_id}")
    assert unknown_watch.status_code == 404
    page = console.get(draft)
    assert (
        page.status_code == 200 and "a draft: not sent" in page.text and "Readers (0 contacts)" in page.text
    )
    assert 'srcdoc="&lt;p&gt;Rust 2.0 is out' in page.text

    # Send it -> a page that asks; a post without the confirmation only leads there.
    assert console.post(draft + "/send", data={"confirmed": ""}).headers["location"] == draft + "?confirm=1"
    asked = console.get(draft + "?confirm=1").text
    assert "Send this campaign now?" in asked and 'name="confirmed" value="yes"' in asked
    sent = console.post(draft + "/send", data={"confirmed": "yes"})
    assert sent.status_code == 303, sent.text
    db.expire_all()
    assert db.get_one(Campaign, campaign_id).scheduled_at is not None
    assert "sending (queued" in console.get(draft).text
    again = console.post(draft + "/send", data={"confirmed": "yes"})
    assert again.status_code == 409 and "already scheduled" in again.text  # the API's own refusal
    # Cross-site: the console's Origin guard, as on every console form.
    foreign = console.post(
        draft + "/send", data={"confirmed": "yes"}, headers={"Origin": "https://evil.example"}
    )
    assert foreign.status_code == 403
