"""What the tests of the shipped processes (tests/test_shipped_serve.py, tests/test_shipped_worker.py) do
through a running server's HTTP interfaces, as a client would: a campaign to a list, a drip automation,
a hosted form, and a feed whose watch filters items with an engine and posts them to a webhook; and
waiting, against the clock, for what the background work delivers to the outside parties on loopback."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from standardwebhooks import Webhook

from tests.factories import rss_source
from tests.processes import Running, tidings_script
from tests.smtp_sink import Received, SmtpSink
from tests.upstream import Upstream
from tests.watches.conftest import make_watch, serve_items

# How long background work may take to reach its outside party: the jobs wake every second at most.
PATIENCE_SECONDS = 20
CONFIRM_LINK = re.compile(r"https?://[^\s\"'<>]+/f/confirm/[A-Za-z0-9_.\-]+")


def api(served: Running, token: str) -> httpx.Client:
    return httpx.Client(base_url=served.base, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def wait_until(
    condition: Callable[[], bool], what: str, *processes: Running, patience: float = PATIENCE_SECONDS
) -> None:
    """Polls `condition` until it holds; fails with `what` and the processes' logs after the patience."""
    deadline = time.monotonic() + patience
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.log_path.name}\n{p.tail()}" for p in processes)
            pytest.fail(f"not within {patience:.0f} s: {what}\n{logs}")
        time.sleep(0.1)


def created(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    body: dict[str, Any] = response.json()
    return body


def new_list(http: httpx.Client, name: str) -> int:
    return int(created(http.post("/lists", json={"name": name}))["id"])


def add_contacts(http: httpx.Client, list_id: int, emails: list[str]) -> None:
    for address in emails:
        created(http.post("/contacts", json={"email": address, "first_name": "Ada", "lists": [list_id]}))


def send_campaign(http: httpx.Client, list_id: int, subject: str) -> int:
    """A campaign to the list, asked to go now (`POST /campaigns/{id}/send`); returns its id."""
    campaign = created(
        http.post(
            "/campaigns",
            json={
                "title": subject,
                "subject": subject,
                "html": '<p>Hi {{ first_name }}</p><a href="https://example.com/">Read</a>',
                "from_name": "Tidings",
                "from_email": "news@example.com",
                "lists": [list_id],
            },
        )
    )
    sent = http.post(f"/campaigns/{campaign['id']}/send")
    assert sent.status_code == 200, sent.text
    return int(campaign["id"])


def received_with(sink: SmtpSink, subject: str) -> list[Received]:
    with sink.lock:
        return [r for r in sink.received if r.message["Subject"] == subject]


def sent_count(http: httpx.Client, campaign_id: int) -> int:
    stats = http.get(f"/campaigns/{campaign_id}/stats")
    assert stats.status_code == 200, stats.text
    return int(stats.json()["sent_count"])


def drip(http: httpx.Client, list_id: int, subject: str) -> int:
    """An active automation whose one email (no delay) goes to whoever joins the list; returns its id."""
    automation = created(
        http.post(
            "/automations",
            json={
                "title": "Welcome",
                "trigger_type": "apply_list",
                "trigger_list_id": list_id,
                "active": True,
            },
        )
    )
    email = {
        "subject": subject,
        "html": "<p>Glad you came</p>",
        "from_name": "Ann",
        "from_email": "a@example.com",
    }
    created(http.post(f"/automations/{automation['id']}/emails", json=email))
    return int(automation["id"])


def create_form(served: Running, env: dict[str, str], owner_email: str, list_id: int) -> int:
    """A hosted sign-up form, made as an operator makes one: `tidings forms create`."""
    done = subprocess.run(
        [
            tidings_script(),
            "forms",
            "create",
            "--email",
            owner_email,
            "--title",
            "Weekly",
            "--list",
            str(list_id),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    form_id, url = done.stdout.split()
    assert url == f"{served.base}/f/{form_id}"
    return int(form_id)


def confirm_path(message: Received) -> str:
    found = CONFIRM_LINK.search(message.part("plain"))
    assert found, message.part("plain")
    return urlsplit(found.group(0)).path


# ----------------------------------------------------------------------------------- a feed and a watch

FILTER = {
    "kind": "semantic_filter",
    "config": {"instructions": "Items worth it", "fetch_external_content": False},
}


def passes(n: int) -> bool:
    """Which items the fake engine scores above the filter's threshold (0.8)."""
    return n % 2 == 0


def watched_feed(http: httpx.Client, upstream: Upstream, items: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A feed of one RSS source on the upstream, and a watch on it: a semantic filter (the fake engine
    scores by the `score=` in each title), then a webhook to the upstream's /hook. The feed starts
    paused and is switched on once the watch is there (a watch does not replay older items), so its
    first poll is at once. Returns (feed, watch)."""
    upstream.serve("/hook", "ok", 200)
    serve_items(upstream, [(f"g{n}", f"Item {n} score={0.93 if passes(n) else 0.2}") for n in range(items)])
    feed = created(
        http.post("/v1/feeds", json={"name": "Local", "sources": [rss_source(upstream)], "is_active": False})
    )
    hook = {"kind": "webhook", "config": {"url": upstream.url("/hook")}}
    watch = make_watch(http, {}, [feed["id"]], [FILTER, hook])  # type: ignore[arg-type]
    activated = http.patch(f"/v1/feeds/{feed['id']}", json={"is_active": True})
    assert activated.status_code == 200, activated.text
    return feed, watch


def delivered(upstream: Upstream) -> Counter[str]:
    """How many times each item key reached the webhook."""
    return Counter(
        item["key"] for call in upstream.requests_to("/hook") for item in json.loads(call.body)["items"]
    )


def expected_deliveries(items: int) -> Counter[str]:
    return Counter({f"rss:g{n}": 1 for n in range(items) if passes(n)})


def events_reach_a_receiver(
    served: Running, token: str, sink: SmtpSink, upstream: Upstream, subject: str, *others: Running
) -> None:
    """An account webhook hears, signed (checked by the library), two contacts join a list, one open
    through the pixel of an email received over SMTP, and the campaign's end; the delivery log says so."""
    path = "/events-" + re.sub(r"\W+", "-", subject.lower())
    upstream.serve(path, "", 204)
    readers = [f"{path[1:]}-{n}@example.com" for n in range(2)]
    wanted = ["contact.subscribed", "contact.opened", "campaign.sent"]
    with api(served, token) as http:
        hook = created(http.post("/webhooks", json={"url": upstream.url(path), "events": wanted}))
        list_id = new_list(http, subject)
        add_contacts(http, list_id, readers)
        campaign_id = send_campaign(http, list_id, subject)
        wait_until(lambda: len(received_with(sink, subject)) == 2, "both emails arrived", served, *others)
        pixel = re.search(r'src="(http://[^"]+/t/o/[^"]+)"', received_with(sink, subject)[0].part("html"))
        assert pixel is not None
        assert httpx.get(pixel[1]).status_code == 200

        def heard() -> list[dict[str, Any]]:
            """Ours (the account's other tests may finish a campaign while this one runs)."""
            signer = Webhook(hook["secret"])
            bodies = [signer.verify(seen.body, seen.headers) for seen in upstream.requests_to(path)]
            return [
                body
                for body in bodies
                if body["data"].get("contact", {}).get("email") in readers
                or body["data"].get("campaign", {}).get("id") == campaign_id
            ]

        def logged() -> list[dict[str, Any]]:
            return list(created(http.get(f"/webhooks/{hook['id']}/deliveries"))["data"])

        wait_until(
            lambda: len(heard()) == 4, "two subscriptions, an open and the campaign's end", served, *others
        )
        # The receiver answered before the lane recorded its answers.
        everything = len(upstream.requests_to(path))
        wait_until(lambda: len(logged()) == everything, "every attempt in the delivery log", served, *others)
        assert all(attempt["state"] == "succeeded" for attempt in logged())
    assert sorted(body["type"] for body in heard()) == sorted(
        ["contact.subscribed", "contact.subscribed", "contact.opened", "campaign.sent"]
    )
    ids = [seen.headers["webhook-id"] for seen in upstream.requests_to(path)]
    assert len(ids) == len(set(ids)), "an event was delivered twice"


def feed_becomes_a_newsletter(
    served: Running, token: str, sink: SmtpSink, upstream: Upstream, subject: str, *others: Running
) -> None:
    """RSS to email: a feed of three posts on the upstream, a watch that filters them with the engine and
    emails the two it keeps to a list as one digest (a window of 2 s on the real clock; the in-process
    tests own the clock for the 60 s one), the email received over SMTP, and its click tracked through
    the server to the post."""
    path = "/newsletter-" + re.sub(r"\W+", "-", subject.lower()) + ".xml"
    readers = [f"{path[1:-4]}-{n}@example.com" for n in range(2)]
    posts = [(f"{path}-{n}", f"Post {n} score={0.93 if passes(n) else 0.2}") for n in range(3)]
    serve_items(upstream, posts, path=path)
    with api(served, token) as http:
        list_id = new_list(http, subject)
        add_contacts(http, list_id, readers)
        feed = created(
            http.post(
                "/v1/feeds",
                json={"name": subject, "sources": [rss_source(upstream, path)], "is_active": False},
            )
        )
        email = {
            "kind": "email",
            "config": {
                "list_ids": [list_id],
                "delivery": "digest",
                "digest_interval_seconds": 2,
                "subject": f"{subject}: {{{{ count }}}} posts",
            },
        }
        make_watch(http, {}, [feed["id"]], [FILTER, email])  # type: ignore[arg-type]
        assert http.patch(f"/v1/feeds/{feed['id']}", json={"is_active": True}).status_code == 200
        wanted = f"{subject}: 2 posts"
        wait_until(
            lambda: len(received_with(sink, wanted)) == 2,
            "the newsletter reached both readers",
            served,
            *others,
        )
        [campaign] = [c for c in created(http.get("/campaigns"))["data"] if c["subject"] == wanted]
        assert campaign["lists"] == [list_id]
    received = received_with(sink, wanted)
    assert sorted(r.recipients[0] for r in received) == readers
    html = received[0].part("html")
    assert "Post 0" in html and "Post 2" in html and "Post 1" not in html
    clicks = re.findall(r'href="(http://[^"]+/t/c/[^"]+)"', html)
    assert len(clicks) == 2
    landed = {httpx.get(link, follow_redirects=False).headers["location"] for link in clicks}
    assert landed == {f"https://example.com/posts/{guid}" for guid, _ in (posts[0], posts[2])}
