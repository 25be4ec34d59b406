"""`tidings serve --no-scheduler` beside a `tidings worker`, both the installed console script (serve on
uvloop, the worker on asyncio's loop): the API only in one process, the background work only in the
other. A campaign and an automation's drip email reach an SMTP server on loopback, and a feed on a local
HTTP server goes through a watch (an engine's filter, then a webhook) to a receiver. On SQLite (two
processes on one file), and on PostgreSQL with TIDINGS_TEST_DATABASE_URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.fake_engine import FakeEngine, running_engine
from tests.processes import Running, committed_users, shipped_serve, shipped_worker
from tests.shipped import (
    add_contacts,
    api,
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


@dataclass
class Split:
    """The API process, the worker, their outside parties on loopback, and an account's token."""

    served: Running
    worker: Running
    token: str
    sink: SmtpSink
    upstream: Upstream
    llm: FakeEngine


@pytest.fixture(scope="module")
def split(database_url: str, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Split]:
    """Started once for the tests below (a start costs seconds); each uses its own lists and subjects."""
    var: Path = tmp_path_factory.mktemp("worker") / "var"
    with ExitStack() as stack:
        [(_, token)] = stack.enter_context(committed_users(engine, "shipped-worker@example.com"))
        sink = stack.enter_context(running_sink())
        upstream = stack.enter_context(running_upstream())
        llm = stack.enter_context(running_engine())
        env = {
            "TIDINGS_SMTP_URL": sink.url,
            "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "true",
            "TIDINGS_ENGINE_BASE_URL": llm.base_url,
        }
        served = stack.enter_context(shipped_serve(database_url, var, "--no-scheduler", **env))
        worker = stack.enter_context(shipped_worker(database_url, var, served.base, **env))
        yield Split(served, worker, token, sink, upstream, llm)


def test_a_campaign_and_a_drip_email_go_out_from_the_worker(split: Split) -> None:
    readers = [f"worker-reader{n}@example.com" for n in range(3)]
    with api(split.served, split.token) as http:
        list_id = new_list(http, "Worker readers")
        drip(http, list_id, "Welcome from the worker")
        add_contacts(http, list_id, readers)
        campaign_id = send_campaign(http, list_id, "Hello from the worker")
        wait_until(
            lambda: (
                len(received_with(split.sink, "Hello from the worker")) == 3
                and len(received_with(split.sink, "Welcome from the worker")) == 3
            ),
            "the campaign's three emails and three drip emails reached the SMTP server",
            split.served,
            split.worker,
        )
        wait_until(lambda: sent_count(http, campaign_id) == 3, "the campaign counts three sent", split.worker)
    for subject in ("Hello from the worker", "Welcome from the worker"):
        assert sorted(r.recipients[0] for r in received_with(split.sink, subject)) == readers
    # The worker sent them, on the loop it ships with (asyncio's, see app.cli.worker); the API process,
    # without a scheduler, has no transport at all.
    assert "background jobs on asyncio's event loop" in split.worker.output()
    assert f"email goes to the SMTP relay 127.0.0.1:{split.sink.port}" in split.worker.output()
    assert "email goes to" not in split.served.output()


def test_a_feed_is_polled_and_its_watch_filters_with_an_engine_and_calls_a_webhook(split: Split) -> None:
    items = 6
    with api(split.served, split.token) as http:
        feed, _ = watched_feed(http, split.upstream, items)
        wait_until(
            lambda: delivered(split.upstream) == expected_deliveries(items),
            "the items that passed the filter reached the webhook, each once",
            split.served,
            split.worker,
        )
        listed = http.get(f"/v1/feeds/{feed['id']}/items").json()["items"]
    assert len(listed) == items
    assert len(split.llm.chat_requests()) == items


def test_account_webhooks_hear_the_workers_events(split: Split) -> None:
    """Events out from the worker's delivery lanes (the API process writes them, the worker sends them)."""
    events_reach_a_receiver(
        split.served, split.token, split.sink, split.upstream, "Heard by the worker", split.worker
    )


def test_a_feed_becomes_a_newsletter_from_the_worker(split: Split) -> None:
    """The watch's email action in the worker, which makes and sends the campaign; the API serves clicks."""
    feed_becomes_a_newsletter(
        split.served, split.token, split.sink, split.upstream, "Picked by the worker", split.worker
    )
