"""`tidings serve` as people run it: the installed console script, uvicorn on uvloop (which
uvicorn[standard] installs), its own scheduler on. Every background job that runs inside it meets its
real outside party on loopback: campaign sending and an automation's drip email reach an SMTP server
(aiosmtpd), a hosted form's double opt-in email goes out inline over the same loop, a feed on a local
HTTP server is polled and its watch filters the items with an engine (a fake OpenAI-compatible one) and
posts them to a webhook receiver (what its jobs do as it starts: tests/test_shipped_serve_start.py). On
SQLite, and on PostgreSQL with TIDINGS_TEST_DATABASE_URL.

(The unit tests drive each job on asyncio's own loop, the send worker's on both; uvloop's transports are
different classes, and an assert about them once kept `tidings serve` from sending any email at all.)"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.fake_engine import FakeEngine, running_engine
from tests.processes import Running, committed_users, environment, shipped_serve
from tests.shipped import (
    add_contacts,
    api,
    confirm_path,
    create_form,
    delivered,
    drip,
    events_reach_a_receiver,
    expected_deliveries,
    feed_becomes_a_newsletter,
    new_list,
    received_with,
    send_campaign,
    sent_count,
    wait_until,
    watched_feed,
)
from tests.smtp_sink import SmtpSink, running_sink
from tests.upstream import Upstream, running_upstream

OWNER = "shipped-serve@example.com"


@dataclass
class Shipped:
    """One `tidings serve` for the module, with its outside parties on loopback and an account."""

    served: Running
    var: Path
    token: str
    sink: SmtpSink
    upstream: Upstream
    llm: FakeEngine


@pytest.fixture(scope="module")
def shipped(database_url: str, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shipped]:
    """Started once for the tests below (a start costs seconds): each uses its own list, subjects,
    feed and addresses. The account and all it holds go after the server stopped."""
    var = tmp_path_factory.mktemp("serve") / "var"
    with ExitStack() as stack:
        [(_, token)] = stack.enter_context(committed_users(engine, OWNER))
        sink = stack.enter_context(running_sink())
        upstream = stack.enter_context(running_upstream())
        llm = stack.enter_context(running_engine())
        env = {
            "TIDINGS_SMTP_URL": sink.url,
            # The feed, the engine and the webhook receiver are on loopback.
            "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "true",
            "TIDINGS_ENGINE_BASE_URL": llm.base_url,
        }
        served = stack.enter_context(shipped_serve(database_url, var, **env))
        yield Shipped(served, var, token, sink, upstream, llm)


def test_uvicorn_serves_on_uvloop() -> None:
    """What the other tests here rely on: uvicorn's `auto` loop is uvloop when it can be imported."""
    assert importlib.util.find_spec("uvloop") is not None, "uvicorn[standard] installs uvloop"


def test_a_campaign_goes_out_over_smtp(shipped: Shipped) -> None:
    readers = [f"reader{n}@example.com" for n in range(3)]
    with api(shipped.served, shipped.token) as http:
        list_id = new_list(http, "Readers")
        add_contacts(http, list_id, readers)
        campaign_id = send_campaign(http, list_id, "Hello from serve")
        wait_until(
            lambda: len(received_with(shipped.sink, "Hello from serve")) == 3,
            "three emails of the campaign reached the SMTP server",
            shipped.served,
        )
        wait_until(
            lambda: sent_count(http, campaign_id) == 3, "the campaign counts three sent", shipped.served
        )
    assert f"email goes to the SMTP relay 127.0.0.1:{shipped.sink.port}" in shipped.served.output()
    got = received_with(shipped.sink, "Hello from serve")
    assert sorted(r.recipients[0] for r in got) == readers
    assert all("Hi Ada" in r.part("html") for r in got)


def test_a_form_sign_up_is_confirmed_by_email_and_the_new_member_gets_the_drip_email(
    database_url: str, shipped: Shipped
) -> None:
    """The confirmation email is sent inline by the request (on uvloop: before the fix, a 503 after
    10 s); confirming adds the contact to the list, which fires the automation, whose email the
    scheduler's send lanes deliver."""
    served, sink = shipped.served, shipped.sink
    with api(served, shipped.token) as http:
        list_id = new_list(http, "Members")
        drip(http, list_id, "Welcome, member")
        form_id = create_form(served, environment(database_url, shipped.var, served.base), OWNER, list_id)

        signed = http.post(f"/f/{form_id}", data={"email": "visitor@example.com"})
        assert signed.status_code == 200, signed.text
        [confirmation] = sink.to("visitor@example.com")
        assert confirmation.message["Subject"] == "Confirm your subscription to Weekly"
        confirmed = http.get(confirm_path(confirmation))
        assert confirmed.status_code == 200, confirmed.text
        assert "You are subscribed" in confirmed.text

        wait_until(
            lambda: len(received_with(sink, "Welcome, member")) == 1,
            "the automation's email reached the new member",
            served,
        )
    [welcome] = received_with(sink, "Welcome, member")
    assert welcome.recipients == ["visitor@example.com"]


def test_a_feed_is_polled_and_its_watch_filters_with_an_engine_and_calls_a_webhook(shipped: Shipped) -> None:
    items = 6
    with api(shipped.served, shipped.token) as http:
        feed, _ = watched_feed(http, shipped.upstream, items)
        wait_until(
            lambda: delivered(shipped.upstream) == expected_deliveries(items),
            "the items that passed the filter reached the webhook, each once",
            shipped.served,
        )
        listed = http.get(f"/v1/feeds/{feed['id']}/items").json()["items"]
    assert len(listed) == items
    assert len(shipped.llm.chat_requests()) == items  # the engine scored each item once


def test_account_webhooks_hear_subscriptions_an_open_and_the_finished_campaign(shipped: Shipped) -> None:
    """Events out from the serving process's own delivery lanes."""
    events_reach_a_receiver(shipped.served, shipped.token, shipped.sink, shipped.upstream, "Heard by serve")


def test_a_feed_becomes_a_newsletter(shipped: Shipped) -> None:
    """The watch's email action in the serving process: RSS, the engine's filter, a digest campaign."""
    feed_becomes_a_newsletter(
        shipped.served, shipped.token, shipped.sink, shipped.upstream, "Picked by serve"
    )
