"""Upstreams that misbehave: broken XML, HTML served as RSS, a 50 MB body, a never-ending response, a
gzip bomb, 429 and 5xx, redirects, slow hosts, and answers that are not what the API promises. The
feed records the error and backs off exponentially, other feeds go on, and nothing crashes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.feeds.connectors import CONNECTORS
from app.feeds.connectors.base import FetchContext, Fetched, SourceJob
from app.kit.time import iso, utcnow
from tests.conftest import ApiUser
from tests.feeds.conftest import Poll, items_of, later, make_feed, rss
from tests.upstream import Upstream, big_body, endless, gzip_bomb, respond, slow


def feed_with(client: TestClient, api_user: ApiUser, upstream: Upstream, path: str) -> dict[str, Any]:
    return make_feed(client, api_user.headers, [{"spec": {"kind": "rss", "url": upstream.url(path)}}])


def view(client: TestClient, api_user: ApiUser, feed: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = client.get(f"/v1/feeds/{feed['id']}", headers=api_user.headers).json()
    return body


BROKEN = (
    b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
    b"<item><guid>ok-1</guid><title>Fine</title><pubDate>{date}</pubDate></item>"
    b"<item><guid>ok-2</guid><title>Cut <b>off"
)


@pytest.mark.parametrize(
    ("handler", "error"),
    [
        (
            respond(
                "<html><head><title>Sign in</title></head><body><p>Log in</p></body></html>",
                200,
                {"Content-Type": "text/html"},
            ),
            "not an RSS or Atom feed",
        ),
        (respond('{"hits": []}', 200, {"Content-Type": "application/json"}), "not an RSS or Atom feed"),
        (respond(b"", 200), "empty"),
        (respond(b"\x00\x01\x02garbage\xff\xfe", 200), "not an RSS or Atom feed"),
        (big_body(50 * 1024 * 1024, declare_length=True), "larger than"),
        (big_body(50 * 1024 * 1024, declare_length=False), "larger than"),
        (gzip_bomb(64 * 1024 * 1024), "larger than"),
        (endless(), "no complete response"),
        (slow(5, respond(rss([]))), "no complete response"),
        (respond("oops", 500), "HTTP 500"),
        (respond("down", 503, {"Retry-After": "30"}), "HTTP 503"),
        (respond("slow down", 429), "HTTP 429"),
        (respond("gone", 404), "HTTP 404"),
        (respond("", 301, {"Location": "https://example.com/new.xml"}), "redirects are not followed"),
    ],
    ids=[
        "html",
        "json",
        "empty",
        "binary",
        "50MB-declared",
        "50MB-streamed",
        "gzip-bomb",
        "never-ending",
        "slow-host",
        "500",
        "503",
        "429",
        "404",
        "301",
    ],
)
def test_a_bad_upstream_is_recorded_on_the_feed_and_backs_off(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, handler: Any, error: str
) -> None:
    upstream.route("/bad.xml", handler)
    feed = feed_with(client, api_user, upstream, "/bad.xml")
    at = later(1)
    assert poll(at=at) == 1
    state = view(client, api_user, feed)
    source = state["sources"][0]
    assert error in source["last_error"], source["last_error"]
    assert source["consecutive_failures"] == 1
    assert error in state["last_error"]
    assert state["consecutive_failures"] == 1
    # Backoff: twice the interval after the first failure, visible as the feed's next poll.
    assert source["retry_at"] == iso(at + timedelta(seconds=600))
    assert state["next_poll_at"] == source["retry_at"]
    assert items_of(client, api_user.headers, feed["id"]) == []


def test_backoff_grows_and_a_success_clears_it(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    upstream.serve("/flaky.xml", "down", 502)
    feed = feed_with(client, api_user, upstream, "/flaky.xml")
    at = later(1)
    waits = []
    for _ in range(4):
        poll(at=at)
        state = view(client, api_user, feed)
        source = state["sources"][0]
        waits.append(source["retry_at"])
        at = at + timedelta(hours=7)  # past any backoff
    assert [view(client, api_user, feed)["sources"][0]["consecutive_failures"]] == [4]
    assert view(client, api_user, feed)["consecutive_failures"] == 4
    upstream.serve("/flaky.xml", rss([("a", "A", utcnow() + timedelta(minutes=2))]))
    poll(at=at)
    state = view(client, api_user, feed)
    assert state["last_error"] is None
    assert state["consecutive_failures"] == 0
    assert state["sources"][0]["retry_at"] is None
    assert len(items_of(client, api_user.headers, feed["id"])) == 1


def test_backoff_doubles_up_to_a_cap() -> None:
    from app.feeds.poll_queue import backoff

    assert [backoff(n, 300, None).total_seconds() for n in range(1, 9)] == [
        600,
        1200,
        2400,
        4800,
        9600,
        19200,
        21600,
        21600,
    ]
    assert backoff(1, 300, 7200).total_seconds() == 7200  # Retry-After lengthens, never shortens
    assert backoff(1, 300, 5).total_seconds() == 600
    assert backoff(3, 86400, None).total_seconds() == 86400  # a daily feed never waits less than a day


def test_broken_xml_keeps_what_can_be_read(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    date = (utcnow() + timedelta(minutes=1)).strftime("%a, %d %b %Y %H:%M:%S GMT").encode()
    upstream.serve("/broken.xml", BROKEN.replace(b"{date}", date))
    feed = feed_with(client, api_user, upstream, "/broken.xml")
    poll(at=later(2))
    assert view(client, api_user, feed)["last_error"] is None
    assert [i["external_id"] for i in items_of(client, api_user.headers, feed["id"])] == ["ok-1"]


def test_one_bad_feed_does_not_stop_the_others(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    upstream.route("/endless.xml", endless())
    upstream.serve("/html.xml", "<html><body>nope</body></html>", 200, **{"Content-Type": "text/html"})
    upstream.serve("/good.xml", rss([("g", "Good", utcnow() + timedelta(minutes=1))]))
    bad = [feed_with(client, api_user, upstream, p) for p in ("/endless.xml", "/html.xml")]
    mixed = make_feed(
        client,
        api_user.headers,
        [{"spec": {"kind": "rss", "url": upstream.url(p)}} for p in ("/good.xml", "/html.xml")],
    )
    good = feed_with(client, api_user, upstream, "/good.xml")
    assert poll(at=later(2)) == 4
    assert [i["external_id"] for i in items_of(client, api_user.headers, good["id"])] == ["g"]
    # A feed with one failing source keeps collecting from the others, and polls on its interval.
    assert [i["external_id"] for i in items_of(client, api_user.headers, mixed["id"])] == ["g"]
    state = view(client, api_user, mixed)
    assert "not an RSS or Atom feed" in state["last_error"]
    assert [s["consecutive_failures"] for s in state["sources"]] == [0, 1]
    assert all(view(client, api_user, f)["consecutive_failures"] == 1 for f in bad)


def test_api_upstreams_answering_nonsense(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    upstream.serve(
        "/hn/api/v1/search_by_date", "<html>maintenance</html>", 200, **{"Content-Type": "text/html"}
    )
    upstream.serve("/reddit/r/python/new.json", '{"kind": "t2", "data": {"name": "x"}}')
    hn = make_feed(client, api_user.headers, [{"spec": {"kind": "board_feed"}}])
    reddit = make_feed(
        client, api_user.headers, [{"spec": {"kind": "forum_community", "community": "python"}}]
    )
    poll(at=later(1))
    assert "not JSON" in view(client, api_user, hn)["last_error"]
    assert "not a listing" in view(client, api_user, reddit)["last_error"]


def test_a_connector_that_crashes_is_an_error_of_its_source(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken:
        kind = "rss"

        def host(self, spec: Mapping[str, Any], settings: Any) -> str:
            return "x"

        async def fetch(self, job: SourceJob, ctx: FetchContext) -> Fetched:
            raise ZeroDivisionError("a bug")

    monkeypatch.setitem(CONNECTORS, "rss", Broken())
    feed = feed_with(client, api_user, upstream, "/any.xml")
    poll(at=later(1))
    assert "internal error: ZeroDivisionError" in view(client, api_user, feed)["last_error"]


def test_a_name_resolving_to_a_private_address_is_refused_when_polling(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    upstream.serve("/feed.xml", rss([]))
    feed = feed_with(client, api_user, upstream, "/feed.xml")
    poll(at=later(1), outbound_allow_private=False)
    assert "non-public" in view(client, api_user, feed)["last_error"]
    assert upstream.seen == []
