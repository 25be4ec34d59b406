"""The `email` watch action (beyond openmagpie): feeds become newsletters. An RSS upstream on loopback, a
watch that filters with the fake engine and emails a list of the email API, the clock the drain takes,
and the real send worker into the loopback SMTP server: the kept posts arrive, with working click
tracking; drafts, the spacing between campaigns, the plan and list rules, and garbage configs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.kit.newsletters import Newsletter
from app.mail.campaigns.campaign_check import SigningPolicy
from app.mail.newsletter_service import MailNewsletters
from app.mail.sending.tokens import MailTokens
from app.mail.sending.transport import SmtpTransport
from app.mail.sending.worker import SendConfig, SendWorker
from app.models import Account, Campaign, ContactList, RunState
from app.watches.run_queue import window_of
from tests.conftest import ApiUser
from tests.factories import rss_source
from tests.mail.sending.conftest import Sender, SmtpSink
from tests.mail.sending.emails import links_in, stats_of
from tests.upstream import Upstream
from tests.watches.conftest import Drain, Poll, later, make_feed, make_watch, runs_of, serve_items

FILTER = {
    "kind": "semantic_filter",
    "config": {"instructions": "Posts worth a newsletter", "fetch_external_content": False},
}
POSTS = [
    ("p1", "Rust in the kernel score=0.93"),
    ("p2", "Celebrity gossip score=0.2"),
    ("p3", "A new PostgreSQL release score=0.95"),
]


@pytest.fixture
def sender(settings: Settings, session_factory: sessionmaker[Session], smtp_sink: SmtpSink) -> Sender:
    """The real send worker over the loopback SMTP server (as in tests/mail/sending)."""
    transport = SmtpTransport(smtp_sink.url, size=4)
    tokens = MailTokens(settings.resolved_secret_key)
    return Sender(
        SendWorker(SendConfig.from_settings(settings), session_factory, transport, tokens), transport, tokens
    )


def email_list(client: TestClient, user: ApiUser, *emails: str) -> int:
    list_id = int(client.post("/lists", json={"name": "Readers"}, headers=user.headers).json()["id"])
    for address in emails:
        body = {"email": address, "first_name": "Ada", "lists": [list_id]}
        assert client.post("/contacts", json=body, headers=user.headers).status_code in (200, 201)
    return list_id


def email_action(list_id: int, **config: Any) -> dict[str, Any]:
    return {"kind": "email", "config": {"list_ids": [list_id], **config}}


def newsletter_watch(
    client: TestClient, user: ApiUser, upstream: Upstream, actions: list[dict[str, Any]]
) -> dict[str, Any]:
    feed = make_feed(client, user.headers, [rss_source(upstream)])
    return make_watch(client, user.headers, [feed["id"]], actions, name="Weekly picks")


def campaigns(db: Session) -> list[Campaign]:
    db.expire_all()
    return list(db.scalars(select(Campaign).order_by(Campaign.id)))


def test_rss_to_email_digest_sends_the_posts_the_filter_kept_with_click_tracking(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    poll: Poll,
    drain: Drain,
    sender: Sender,
    smtp_sink: SmtpSink,
    db: Session,
) -> None:
    list_id = email_list(client, api_user, "ann@example.com", "bob@example.com")
    digest = email_action(
        list_id,
        delivery="digest",
        digest_interval_seconds=60,
        subject="{{ watch.name }}: {{ count }} new posts",
        from_name="The Picks",
        from_email="picks@example.com",
    )
    watch = newsletter_watch(client, api_user, upstream, [FILTER, digest])
    email_id = watch["actions"][1]["id"]
    serve_items(upstream, POSTS)
    at = later(minutes=1)
    assert poll(at=at) == 1
    drain(at=at)
    # The filter kept two posts; their email runs wait for the window's end, and no campaign exists.
    waiting = runs_of(db, email_id)
    assert len(waiting) == 2 and {run.state for run in waiting} == {RunState.PENDING}
    assert campaigns(db) == []
    end = window_of(at, 60)[1]
    drain(at=end + timedelta(seconds=1))
    [campaign] = campaigns(db)
    done = runs_of(db, email_id)
    assert {run.state for run in done} == {RunState.SUCCEEDED}
    assert {run.attempts for run in done} == {1}  # waiting for the window was not an attempt
    assert done[0].result == {"campaign_id": campaign.id, "mode": "send", "scheduled": True, "item_count": 2}
    shown = client.get(f"/campaigns/{campaign.id}", headers=api_user.headers).json()
    assert shown["subject"] == "Weekly picks: 2 new posts" and shown["lists"] == [list_id]
    assert shown["from_email"] == "picks@example.com" and shown["from_name"] == "The Picks"
    assert shown["scheduled_at"] is not None

    assert sender.drain() == 2
    received = sorted(smtp_sink.received, key=lambda r: r.recipients[0])
    assert [r.recipients for r in received] == [["ann@example.com"], ["bob@example.com"]]
    html = received[0].part("html")
    assert "Rust in the kernel" in html and "A new PostgreSQL release" in html
    assert "Celebrity gossip" not in html
    assert received[0].message["Subject"] == "Weekly picks: 2 new posts"
    # Each post's link is tracked: the redirect goes to the post and the click counts.
    clicks = links_in(received[0]).clicks
    assert len(clicks) == 2
    targets = set()
    for path in clicks:
        response = client.get(path, follow_redirects=False)
        assert response.status_code in (302, 303, 307), response.text
        targets.add(response.headers["location"])
    assert targets == {"https://example.com/posts/p1", "https://example.com/posts/p3"}
    assert stats_of(client, api_user.headers, campaign.id)["unique_click_count"] == 1


def test_draft_mode_leaves_a_draft_campaign_in_the_email_api(
    client: TestClient,
    api_user: ApiUser,
    upstream: Upstream,
    poll: Poll,
    drain: Drain,
    sender: Sender,
    smtp_sink: SmtpSink,
) -> None:
    list_id = email_list(client, api_user, "ann@example.com")
    template = (
        '<p>Hi {{ first_name | "friend" }},</p>{% for item in items %}'
        '<p><a href="{{ item.url }}">{{ item.title }}</a> by {{ item.author }}</p>{% endfor %}'
    )
    watch = newsletter_watch(
        client, api_user, upstream, [email_action(list_id, mode="draft", template=template)]
    )
    serve_items(upstream, [("d1", "Draft me & {{ email }}")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    listed = client.get("/campaigns", headers=api_user.headers).json()["data"]
    [draft] = [c for c in listed if c["title"].startswith("Weekly picks")]
    assert draft["scheduled_at"] is None and draft["sent_at"] is None and draft["lists"] == [list_id]
    # The item's text is escaped and cannot form a merge tag; the contact's merge tag is kept for the send.
    assert "Draft me &amp; &#123;&#123; email &#125;&#125;" in draft["html"]
    assert '{{ first_name | "friend" }}' in draft["html"]
    assert 'href="https://example.com/posts/d1"' in draft["html"]
    assert draft["subject"] == "Draft me & { { email } }"
    activity = client.get(f"/v1/actions/{watch['actions'][0]['id']}/activity", headers=api_user.headers)
    [run] = activity.json()["items"]
    assert run["result"]["campaign_id"] == draft["id"] and run["result"]["mode"] == "draft"
    assert sender.drain() == 0  # a draft sends nothing until a person sends it
    sent = client.post(f"/campaigns/{draft['id']}/send", headers=api_user.headers)
    assert sent.status_code == 200, sent.text
    assert sender.drain() == 1
    # Sent, the item's braces read as braces in both parts: neither names the recipient's address.
    [received] = smtp_sink.received
    assert "Draft me &amp; &#123;&#123; email &#125;&#125;" in received.part("html")
    assert "Draft me & {{ email }}" in received.part("plain")
    assert "Draft me & ann@example.com" not in received.part("plain")


def test_an_instant_email_waits_its_spacing_and_folds_the_flood_into_the_next_campaign(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    list_id = email_list(client, api_user, "ann@example.com")
    watch = newsletter_watch(client, api_user, upstream, [email_action(list_id)])
    action = watch["actions"][0]
    assert action["config"]["min_interval_seconds"] == 3600  # the default for instant delivery
    serve_items(upstream, [("f1", "First")])
    t0 = later(minutes=1)
    poll(at=t0)
    drain(at=t0)
    [first] = campaigns(db)
    assert first.subject == "First"
    serve_items(upstream, [("f1", "First"), ("f2", "Second"), ("f3", "Third")])
    t1 = t0 + timedelta(minutes=20)
    poll(at=t1)
    drain(at=t1)
    assert len(campaigns(db)) == 1  # within the hour: the new posts wait
    waiting = [run for run in runs_of(db, action["id"]) if run.state == RunState.PENDING]
    assert len(waiting) == 2 and {run.attempts for run in waiting} == {0}
    drain(at=t0 + timedelta(minutes=59))
    assert len(campaigns(db)) == 1
    drain(at=t0 + timedelta(minutes=60, seconds=1))
    [_, second] = campaigns(db)
    assert second.subject == "Weekly picks: 2 new items"
    assert "Second" in second.html and "Third" in second.html and "First" not in second.html


def test_without_a_spacing_each_item_is_its_own_campaign(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    list_id = email_list(client, api_user, "ann@example.com")
    newsletter_watch(client, api_user, upstream, [email_action(list_id, min_interval_seconds=0)])
    serve_items(upstream, [("a", "Alpha"), ("b", "Beta")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    assert sorted(c.subject for c in campaigns(db)) == ["Alpha", "Beta"]


def test_a_free_plan_account_cannot_use_the_action(
    client: TestClient, make_user: Any, api_user: ApiUser, upstream: Upstream
) -> None:
    list_id = email_list(client, api_user, "ann@example.com")
    free = make_user(plan="free")
    feed = make_feed(client, free.headers, [rss_source(upstream)])
    response = client.post(
        "/v1/watches",
        json={"name": "Free", "feed_ids": [feed["id"]], "actions": [email_action(list_id)]},
        headers=free.headers,
    )
    assert response.status_code == 400, response.text
    assert "paid plan" in response.json()["detail"]["actions[0].config.list_ids"][0]
    assert client.get("/v1/watches", headers=free.headers).json()["items"] == []


def test_lists_must_be_the_accounts_own(
    client: TestClient, make_user: Any, api_user: ApiUser, upstream: Upstream
) -> None:
    mine = email_list(client, api_user, "ann@example.com")
    other = make_user()
    theirs = email_list(client, other, "bob@example.com")
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    response = client.post(
        "/v1/watches",
        json={
            "name": "Lists",
            "feed_ids": [feed["id"]],
            "actions": [{"kind": "email", "config": {"list_ids": [mine, theirs, 999_999]}}],
        },
        headers=api_user.headers,
    )
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert set(detail) == {"actions[0].config.list_ids.1", "actions[0].config.list_ids.2"}


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"list_ids": []},
        {"list_ids": "1"},
        {"list_ids": ["one"]},
        {"list_ids": [0]},
        {"list_ids": [-3]},
        {"list_ids": [2**40]},
        {"list_ids": list(range(1, 102))},
        {"list_ids": [1], "subject": "x" * 192},
        {"list_ids": [1], "subject": "{% if x %}"},
        {
            "list_ids": [1],
            "template": "{% for item in items %}{% for item in items %}{% endfor %}{% endfor %}",
        },
        {"list_ids": [1], "template": "{% for post in posts %}{% endfor %}"},
        {"list_ids": [1], "template": 7},
        {"list_ids": [1], "from_email": "not an address"},
        {"list_ids": [1], "from_name": ["x"]},
        {"list_ids": [1], "mode": "later"},
        {"list_ids": [1], "delivery": "weekly"},
        {"list_ids": [1], "min_interval_seconds": -1},
        {"list_ids": [1], "min_interval_seconds": "soon"},
        {"list_ids": [1], "digest_interval_seconds": 2**40},
    ],
)
def test_garbage_configs_are_refused_with_a_field_and_store_nothing(
    client: TestClient, api_user: ApiUser, config: dict[str, Any]
) -> None:
    response = client.post(
        "/v1/watches",
        json={"name": "Bad", "actions": [{"kind": "email", "config": config}]},
        headers=api_user.headers,
    )
    assert response.status_code == 400, response.text
    assert all(name.startswith("actions[0].config") for name in response.json()["detail"])
    assert client.get("/v1/watches", headers=api_user.headers).json()["items"] == []


def test_a_plan_downgraded_later_errors_the_run_and_makes_no_campaign(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, drain: Drain, db: Session
) -> None:
    list_id = email_list(client, api_user, "ann@example.com")
    watch = newsletter_watch(client, api_user, upstream, [email_action(list_id)])
    db.get_one(Account, api_user.account_id).plan = "free"
    db.commit()
    serve_items(upstream, [("x", "Too late")])
    at = later(minutes=1)
    poll(at=at)
    drain(at=at)
    [run] = runs_of(db, watch["actions"][0]["id"])
    assert run.state == RunState.ERRORED and "paid plan" in run.error
    assert campaigns(db) == []


def newsletter_to_a_list(db: Session, api_user: ApiUser, key: str = "k" * 64) -> Newsletter:
    """A newsletter to send to a new list of the account, as the email action hands it to the desk."""
    listed = ContactList(account_id=api_user.account_id, user_id=api_user.user_id, name="L")
    db.add(listed)
    db.flush()
    return Newsletter(
        account_id=api_user.account_id,
        list_ids=[listed.id],
        title="T",
        subject="S",
        html="<p>x</p>",
        from_name=None,
        from_email=None,
        mode="send",
        key=key,
    )


def test_the_same_runs_make_one_campaign_however_often_they_are_published(
    db: Session, api_user: ApiUser
) -> None:
    """A worker that died after making the campaign and before recording its runs retries them: the key
    finds the campaign it made, so the lists are not emailed twice."""
    letter = newsletter_to_a_list(db, api_user)
    desk = MailNewsletters()
    first = desk.publish(db, letter)
    again = desk.publish(db, letter)
    assert first == again and first.scheduled
    assert db.scalar(select(func.count()).select_from(Campaign)) == 1
    made = db.get_one(Campaign, first.campaign_id)
    # The account's user is the sender when the action names none.
    assert made.from_email == api_user.email and made.from_name == "Test User"


def test_a_serious_finding_of_the_check_before_send_leaves_the_newsletter_a_draft(
    db: Session, api_user: ApiUser
) -> None:
    """The check a campaign sent by hand passes holds for a watch's too: under production, a From domain
    with no DKIM key is refused, so the campaign is made and left a draft where a person sees why."""
    letter = newsletter_to_a_list(db, api_user)
    published = MailNewsletters(SigningPolicy(refuse_unsigned=True)).publish(db, letter)
    made = db.get_one(Campaign, published.campaign_id)
    assert not published.scheduled and made.scheduled_at is None
    # Without the refusal (not production) the same newsletter goes out.
    other = newsletter_to_a_list(db, api_user, key="o" * 64)
    assert MailNewsletters(SigningPolicy()).publish(db, other).scheduled
