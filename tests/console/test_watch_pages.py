"""The console's Newsletter from a feed and Watches in-process: the recipe saved as the watch
POST /v1/watches makes, its preview from the feed's items, a filter refused with the engine's reason
when none is set up, and the chain edited in place with the API's own messages."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.kit.ids import new_ulid
from app.mail.list_service import make_list
from app.models import FeedItem
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
        "list_ids": [str(newsletter["id"])],
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
    assert email["config"]["mode"] == "draft" and email["config"]["list_ids"] == [newsletter["id"]]

    page = client.get(f"/console/watches/{watch_id}")
    assert page.status_code == 200, page.text
    assert '<svg class="chart"' in page.text and "Runs of semantic_filter" in page.text
    assert "Rust digest" in client.get("/console/watches").text

    filter_id = api["actions"][0]["id"]
    bad = client.post(
        f"/console/watches/{watch_id}/actions/{filter_id}", data={"config": '{"instructions": ""}'}
    )
    assert bad.status_code == 400
    assert "config.instructions:" in bad.text
    not_json = client.post(f"/console/watches/{watch_id}/actions", data={"kind": "log", "config": "{nope"})
    assert not_json.status_code == 400 and "config: Must be a JSON object" in not_json.text

    added = client.post(
        f"/console/watches/{watch_id}/actions", data={"kind": "log", "config": '{"prefix": "[rust]"}'}
    )
    assert added.status_code == 303
    log_id = client.get(f"/v1/watches/{watch_id}").json()["actions"][2]["id"]
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
        data={"config": '{"instructions": "Rust only", "threshold": 0.5}'},
    )
    assert edited.status_code == 303
    actions = client.get(f"/v1/watches/{watch_id}").json()["actions"]
    assert [a["kind"] for a in actions] == ["semantic_filter", "email"]
    assert actions[0]["config"]["instructions"] == "Rust only"

    assert client.post(f"/console/watches/{watch_id}/delete").status_code == 303
    assert client.get(f"/v1/watches/{watch_id}").status_code == 404
