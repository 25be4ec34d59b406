"""The Hacker News connectors (board_feed, board_comment) against a local server that plays the Algolia
search API, and the Reddit connector (forum_community) against one that plays Reddit's listings."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient

from app.kit.time import iso, utcnow
from tests.conftest import ApiUser
from tests.feeds.conftest import Poll, items_of, later, make_feed
from tests.upstream import Upstream

HN_PATH = "/hn/api/v1/search_by_date"


def json_handler(pages: Any, headers: dict[str, str] | None = None, status: int = 200) -> Any:
    """Serves `pages(query) -> document`."""

    def handle(request: Any) -> None:
        from urllib.parse import parse_qs, urlsplit

        query = {k: v[0] for k, v in parse_qs(urlsplit(request.path).query).items()}
        body = json.dumps(pages(query)).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    return handle


def story(object_id: int, minutes: float, **fields: Any) -> dict[str, Any]:
    moment = utcnow() + timedelta(minutes=minutes)
    return {
        "objectID": str(object_id),
        "created_at_i": int(moment.timestamp()),
        "created_at": iso(moment),
        "title": f"Story {object_id}",
        "url": f"https://example.com/{object_id}",
        "author": "pg",
        "points": 10,
        "num_comments": 3,
        "story_text": None,
        **fields,
    }


def test_board_feed_asks_search_by_date_and_maps_stories(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    hits = [story(2, 2), story(1, 1, story_text="<p>Ask &amp; tell</p>", url=None)]
    upstream.route(
        HN_PATH, json_handler(lambda q: {"hits": hits, "nbPages": 1, "page": 0, "hitsPerPage": 100})
    )
    feed = make_feed(
        client,
        api_user.headers,
        [{"spec": {"kind": "board_feed", "feed": "show", "query": "rust sqlite", "match": "any"}}],
    )
    poll(at=later(3))
    (request,) = upstream.requests_to(HN_PATH)
    query = {k: v[0] for k, v in request.query.items()}
    source_start = feed["sources"][0]["last_event_at"]
    assert query["tags"] == "show_hn"
    assert query["query"] == "rust sqlite"
    assert query["optionalWords"] == "rust sqlite"
    assert query["numericFilters"].startswith("created_at_i>")
    assert abs(int(query["numericFilters"].split(">")[1]) - int(utcnow().timestamp())) < 60, source_start
    assert query["hitsPerPage"] == "100"
    items = items_of(client, api_user.headers, feed["id"])
    assert [i["external_id"] for i in items] == ["2", "1"]
    data = items[1]["data"]
    assert items[1]["source_kind"] == "board_feed"
    assert items[1]["source_label"] == "HN show: rust sqlite (any word)"
    assert data["kind"] == "board_feed"
    assert data["title"] == "Story 1"
    assert data["content"] == "Ask & tell"
    assert data["url"] == "https://news.ycombinator.com/item?id=1"
    assert data["external_url"] == ""
    assert (data["author"], data["points"], data["num_comments"], data["feed"]) == ("pg", 10, 3, "show")


def test_board_feed_match_all_and_paging_through_a_backfill(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    pages = {0: [story(n, -n) for n in range(1, 101)], 1: [story(n, -n) for n in range(101, 151)]}
    upstream.route(
        HN_PATH,
        json_handler(
            lambda q: {"hits": pages.get(int(q.get("page", 0)), []), "nbPages": 2, "hitsPerPage": 100}
        ),
    )
    start = utcnow() - timedelta(days=1)
    feed = make_feed(
        client,
        api_user.headers,
        [{"spec": {"kind": "board_feed", "query": "db"}, "last_event_at": iso(start)}],
    )
    poll(at=later(1))
    requests = upstream.requests_to(HN_PATH)
    assert [r.query["page"] for r in requests] == [["0"], ["1"]]
    assert requests[0].query["tags"] == ["story"]
    assert "optionalWords" not in requests[0].query
    assert requests[0].query["numericFilters"] == [f"created_at_i>{int(start.timestamp())}"]
    items = items_of(client, api_user.headers, feed["id"], limit=200)
    assert len(items) == 150
    assert items[0]["external_id"] == "1"  # the newest


def test_board_comment_maps_comments_to_their_story(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    comment = {
        "objectID": "901",
        "created_at_i": int((utcnow() + timedelta(minutes=1)).timestamp()),
        "author": "dang",
        "comment_text": "<p>Use <i>SQLite</i> &gt; files</p>",
        "story_id": 900,
        "story_title": "SQLite is enough",
        "story_url": "https://example.com/sqlite",
        "parent_id": 900,
    }
    upstream.route(HN_PATH, json_handler(lambda q: {"hits": [comment, {"objectID": "bad"}], "nbPages": 1}))
    feed = make_feed(client, api_user.headers, [{"spec": {"kind": "board_comment", "query": "sqlite"}}])
    poll(at=later(2))
    assert upstream.requests_to(HN_PATH)[0].query["tags"] == ["comment"]
    (item,) = items_of(client, api_user.headers, feed["id"])
    data = item["data"]
    assert item["source_kind"] == "board_comment"
    assert data["kind"] == "board_comment"
    assert data["title"] == data["story_title"] == "SQLite is enough"
    assert data["content"] == "Use SQLite > files"
    assert data["parent_external_id"] == "900"
    assert data["author"] == "dang"
    assert data["url"] == "https://news.ycombinator.com/item?id=901"


def post(post_id: str, minutes: float, **fields: Any) -> dict[str, Any]:
    return {
        "kind": "t3",
        "data": {
            "id": post_id,
            "name": f"t3_{post_id}",
            "title": f"Post {post_id}",
            "selftext": "Hello &amp; welcome",
            "author": "spez",
            "permalink": f"/r/selfhosted/comments/{post_id}/post/",
            "url": f"https://example.com/{post_id}",
            "is_self": False,
            "subreddit": "selfhosted",
            "created_utc": (utcnow() + timedelta(minutes=minutes)).timestamp(),
            "score": 5,
            "num_comments": 1,
            **fields,
        },
    }


def listing(posts: list[dict[str, Any]], after: str | None = None) -> dict[str, Any]:
    return {"kind": "Listing", "data": {"after": after, "children": posts}}


REDDIT_PATH = "/reddit/r/selfhosted/new.json"


def test_forum_community_reads_new_posts_with_an_honest_user_agent(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    upstream.route(
        REDDIT_PATH,
        json_handler(
            lambda q: listing([post("b", 2), post("a", 1, is_self=True), post("old", -60)]),
            {"X-Ratelimit-Remaining": "99", "X-Ratelimit-Reset": "300", "X-Ratelimit-Used": "1"},
        ),
    )
    feed = make_feed(
        client, api_user.headers, [{"spec": {"kind": "forum_community", "community": "selfhosted"}}]
    )
    poll(at=later(3))
    (request,) = upstream.requests_to(REDDIT_PATH)
    agent = request.headers["user-agent"]
    assert agent.startswith("python:tidings:")
    assert "Mozilla" not in agent
    assert request.query["limit"] == ["100"]
    items = items_of(client, api_user.headers, feed["id"])
    assert [i["external_id"] for i in items] == ["b", "a"]
    data = items[1]["data"]
    assert items[1]["source_label"] == "r/selfhosted"
    assert data["kind"] == "new_post"
    assert data["source"] == "forum_community"
    assert data["community"] == "selfhosted"
    assert data["permalink"] == "/r/selfhosted/comments/a/post/"
    assert data["url"] == upstream.url("/reddit/r/selfhosted/comments/a/post/")
    assert data["external_url"] == ""  # a self post links nowhere else
    assert data["content"] == "Hello & welcome"
    assert items[0]["data"]["external_url"] == "https://example.com/b"


def test_forum_pages_until_it_reaches_what_it_has(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    pages = {
        "": listing([post(f"n{n}", -n) for n in range(100)], after="t3_n99"),
        "t3_n99": listing([post(f"n{n}", -n) for n in range(100, 130)], after="t3_n129"),
        "t3_n129": listing([post("too-old", -60 * 24 * 10)], after=None),
    }
    upstream.route(REDDIT_PATH, json_handler(lambda q: pages[q.get("after", "")]))
    start = utcnow() - timedelta(hours=5)
    feed = make_feed(
        client,
        api_user.headers,
        [{"spec": {"kind": "forum_community", "community": "selfhosted"}, "last_event_at": iso(start)}],
    )
    poll(at=later(1))
    assert [r.query.get("after") for r in upstream.requests_to(REDDIT_PATH)] == [
        None,
        ["t3_n99"],
        ["t3_n129"],
    ]
    assert len(items_of(client, api_user.headers, feed["id"])) == 130


def test_forum_respects_a_spent_rate_limit(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    """Remaining 0: the page is used, and no further request goes out until the window resets."""
    upstream.route(
        REDDIT_PATH,
        json_handler(
            lambda q: listing([post("a", 1)], after="t3_a"),
            {"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "120"},
        ),
    )
    feed = make_feed(
        client, api_user.headers, [{"spec": {"kind": "forum_community", "community": "selfhosted"}}]
    )
    poll(at=later(2))
    assert len(upstream.requests_to(REDDIT_PATH)) == 1
    assert [i["external_id"] for i in items_of(client, api_user.headers, feed["id"])] == ["a"]


def test_forum_429_waits_for_retry_after(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    upstream.route(
        REDDIT_PATH,
        json_handler(
            lambda q: {"message": "Too Many Requests", "error": 429},
            {"Retry-After": "7200", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "100"},
            status=429,
        ),
    )
    feed = make_feed(
        client, api_user.headers, [{"spec": {"kind": "forum_community", "community": "selfhosted"}}]
    )
    at = later(2)
    poll(at=at)
    view = client.get(f"/v1/feeds/{feed['id']}", headers=api_user.headers).json()
    source = view["sources"][0]
    assert "429" in source["last_error"]
    assert source["consecutive_failures"] == 1
    # The wait is at least the upstream's Retry-After (two hours), not the plain backoff (10 minutes).
    assert source["retry_at"] >= iso(at + timedelta(seconds=7200 - 1))  # type: ignore[operator]
    assert "429" in view["last_error"]
    assert view["next_poll_at"] >= source["retry_at"]
    # Polling again before then sends nothing to the host.
    poll(at=at + timedelta(minutes=30))
    assert len(upstream.requests_to(REDDIT_PATH)) == 1
