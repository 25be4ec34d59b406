"""Polling RSS sources from a local server: live mode and backfill, conditional GET, deduplication,
newest-first ULIDs, field maps, character sets, the items cursor, retention, pauses, and leases."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import is_sqlite_url, make_session_factory, make_write_session_factory, transaction
from app.feeds.poll_queue import FeedPollResult, claim_due_feeds, record_polls
from app.feeds.poller import FeedPoller
from app.feeds.source_service import replace_sources
from app.feeds.specs import SourceInput
from app.identity.accounts import create_user
from app.kit.ids import new_ulid
from app.kit.time import iso, utcnow
from app.models import Account, Feed, FeedItem, Source
from app.watches.run_queue import enqueue_first_runs
from tests.conftest import ApiUser
from tests.factories import rss_source
from tests.feeds.conftest import Poll, items_of, later, make_feed, rss
from tests.upstream import Upstream, respond, slow


def test_live_mode_takes_only_what_is_published_after_the_source_was_added(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    now = utcnow()
    upstream.serve(
        "/feed.xml",
        rss(
            [("old-1", "Old one", now - timedelta(days=1)), ("new-1", "New one", now + timedelta(minutes=1))]
        ),
    )
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    assert poll(at=later(5)) == 1
    items = items_of(client, api_user.headers, feed["id"])
    assert [i["external_id"] for i in items] == ["new-1"]
    item = items[0]
    assert set(item) == {"id", "source_kind", "external_id", "occurred_at", "source_label", "data"}
    assert item["source_kind"] == "rss"
    assert item["source_label"] == "Local"
    data = item["data"]
    assert data["kind"] == "rss_entry"
    assert data["source"] == "rss"
    assert data["title"] == "New one"
    assert data["content"] == "Body of New one"  # markup stripped
    assert data["url"] == data["external_url"] == "https://example.com/posts/new-1"
    assert data["categories"] == ["news"]
    assert data["feed_url"] == upstream.url("/feed.xml")
    assert data["occurred_at"] == item["occurred_at"]
    view = client.get(f"/v1/feeds/{feed['id']}", headers=api_user.headers).json()
    assert view["last_polled_at"] is not None
    assert view["last_error"] is None
    assert view["sources"][0]["last_event_at"] == item["occurred_at"]


def test_a_past_last_event_at_backfills(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    now = utcnow()
    upstream.serve(
        "/feed.xml",
        rss([(f"p{i}", f"Post {i}", now - timedelta(days=i)) for i in range(1, 6)]),
    )
    start = now - timedelta(days=3, hours=12)
    feed = make_feed(client, api_user.headers, [rss_source(upstream, last_event_at=iso(start))])
    poll(at=later(1))
    assert [i["external_id"] for i in items_of(client, api_user.headers, feed["id"])] == ["p1", "p2", "p3"]


def test_new_items_are_added_once_and_listed_newest_first(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    now = utcnow()
    first = [("a", "A", now + timedelta(minutes=1)), ("b", "B", now + timedelta(minutes=2))]
    upstream.serve("/feed.xml", rss(first))
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    poll(at=later(3))
    upstream.serve("/feed.xml", rss([*first, ("c", "C", now + timedelta(minutes=4))]))
    poll(at=later(10))
    items = items_of(client, api_user.headers, feed["id"])
    assert [i["external_id"] for i in items] == ["c", "b", "a"]
    ids = [i["id"] for i in items]
    assert ids == sorted(ids, reverse=True)
    # Repeats are not stored again.
    poll(at=later(20))
    assert len(items_of(client, api_user.headers, feed["id"])) == 3


def test_conditional_get_uses_etag_and_last_modified(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    now = utcnow()
    document = rss([("a", "A", now + timedelta(minutes=1))])
    validators = {"ETag": '"v1"', "Last-Modified": "Sun, 22 Nov 2026 00:00:00 GMT"}
    calls: list[dict[str, str]] = []

    def handler(request: Any) -> None:
        calls.append({k.lower(): v for k, v in request.headers.items()})
        if request.headers.get("If-None-Match") == '"v1"':
            request.send_response(304)
            request.send_header("ETag", '"v1"')
            request.send_header("Content-Length", "0")
            request.end_headers()
            return
        request.send_response(200)
        for name, value in validators.items():
            request.send_header(name, value)
        request.send_header("Content-Type", "application/rss+xml; charset=utf-8")
        request.send_header("Content-Length", str(len(document)))
        request.end_headers()
        request.wfile.write(document)

    upstream.route("/feed.xml", handler)
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    poll(at=later(2))
    poll(at=later(10))
    assert "if-none-match" not in calls[0]
    assert calls[1]["if-none-match"] == '"v1"'
    assert calls[1]["if-modified-since"] == "Sun, 22 Nov 2026 00:00:00 GMT"
    view = client.get(f"/v1/feeds/{feed['id']}", headers=api_user.headers).json()
    assert view["last_error"] is None
    assert len(items_of(client, api_user.headers, feed["id"])) == 1


def test_atom_documents_and_field_maps(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    moment = iso(utcnow() + timedelta(minutes=1))
    atom = f"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Atom</title>
<entry><id>urn:entry:1</id><title>Entry &amp; more</title><link href="https://example.com/1"/>
<updated>{moment}</updated><summary>Short</summary>
<content type="html">&lt;p&gt;Long &lt;b&gt;body&lt;/b&gt;&lt;/p&gt;
&lt;script&gt;alert(1)&lt;/script&gt;</content><author><name>Bea</name></author></entry></feed>"""
    upstream.serve("/atom.xml", atom, **{"Content-Type": "application/atom+xml"})
    feed = make_feed(
        client,
        api_user.headers,
        [rss_source(upstream, "/atom.xml", field_map={"author": "title"})],
        data={"default_field_map": {"title": "link", "unknown": "ignored"}},
    )
    poll(at=later(2))
    (item,) = items_of(client, api_user.headers, feed["id"])
    data = item["data"]
    assert item["external_id"] == "urn:entry:1"
    assert data["content"] == "Long body"
    assert data["title"] == "https://example.com/1"  # the feed's default map
    assert data["author"] == "Entry & more"  # the source's own map
    assert "unknown" not in data


def test_wrong_and_missing_charsets_are_read_right(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    moment = utcnow() + timedelta(minutes=1)
    latin = rss([("1", "Caf\xe9 na\xefve", moment)], encoding="iso-8859-1")
    undeclared = latin.replace(b' encoding="iso-8859-1"', b"")
    upstream.serve("/lying.xml", latin, **{"Content-Type": "application/rss+xml; charset=utf-8"})
    upstream.serve("/undeclared.xml", undeclared, **{"Content-Type": "text/xml"})
    upstream.serve(
        "/utf8-says-latin.xml", rss([("1", "Caf\xe9 \u2603", moment)]).replace(b"utf-8", b"iso-8859-1")
    )
    feed = make_feed(
        client,
        api_user.headers,
        [rss_source(upstream, path) for path in ("/lying.xml", "/undeclared.xml", "/utf8-says-latin.xml")],
    )
    poll(at=later(2))
    titles = sorted(i["data"]["title"] for i in items_of(client, api_user.headers, feed["id"]))
    assert titles == ["Café naïve", "Café naïve", "Café \u2603"]


def test_undated_entries_count_when_they_first_appear_after_the_first_poll(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    # Live mode: the undated entries listed when the source starts were there before it.
    upstream.serve("/feed.xml", rss([("u1", "Undated", None), ("42", "Numeric guid", None)]))
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    poll(at=later(1))
    assert items_of(client, api_user.headers, feed["id"]) == []
    upstream.serve(
        "/feed.xml",
        rss([("u1", "Undated", None), ("42", "Numeric guid", None), ("u2", "New", None), ("43", "N", None)]),
    )
    poll(at=later(10))
    items = items_of(client, api_user.headers, feed["id"])
    # A numeric guid is not taken for a date (it would be the year 2043).
    assert {i["external_id"] for i in items} == {"u2", "43"}
    assert all(i["occurred_at"] is None for i in items)


def test_an_undated_entry_pruned_by_retention_is_not_new_again(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, db: Session
) -> None:
    """Retention prunes by store time; an undated entry the feed still lists must not come back as a
    new item (a watch would run on it again) once its stored row is gone."""
    upstream.serve("/feed.xml", rss([]))
    feed = make_feed(client, api_user.headers, [rss_source(upstream)], data={"retention_days": 2})
    poll(at=later(1))
    upstream.serve("/feed.xml", rss([("static", "Always listed", None)]))
    poll(at=later(10))
    assert [i["external_id"] for i in items_of(client, api_user.headers, feed["id"])] == ["static"]
    poll(at=later(days=3))  # pruned: stored more than two days ago
    assert items_of(client, api_user.headers, feed["id"]) == []
    poll(at=later(days=4))
    assert items_of(client, api_user.headers, feed["id"]) == []
    # A longer retention, so what the next poll stores stays to be seen: a new undated entry counts.
    db.execute(update(Feed).where(Feed.id == feed["id"]).values(retention_days=365))
    db.commit()
    upstream.serve("/feed.xml", rss([("static", "Always listed", None), ("fresh", "Fresh", None)]))
    poll(at=later(days=5))
    assert {i["external_id"] for i in items_of(client, api_user.headers, feed["id"])} == {"fresh"}


def test_the_items_cursor(client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll) -> None:
    now = utcnow()
    upstream.serve(
        "/feed.xml", rss([(f"i{n}", f"Item {n}", now + timedelta(minutes=1, seconds=n)) for n in range(7)])
    )
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    poll(at=later(2))
    seen: list[str] = []
    after = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3}
        if after:
            params["after"] = after
        page = client.get(f"/v1/feeds/{feed['id']}/items", params=params, headers=api_user.headers).json()
        pages += 1
        seen.extend(i["external_id"] for i in page["items"])
        after = page["next_cursor"]
        if after is None:
            break
        assert after == page["items"][-1]["id"]
    assert pages == 3
    assert seen == [f"i{n}" for n in range(6, -1, -1)]


def test_retention_prunes_old_items(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, db: Session
) -> None:
    now = utcnow()
    upstream.serve("/feed.xml", rss([("a", "A", now + timedelta(minutes=1))]))
    feed = make_feed(client, api_user.headers, [rss_source(upstream)], data={"retention_days": 2})
    poll(at=later(2))
    assert len(items_of(client, api_user.headers, feed["id"])) == 1
    upstream.serve("/feed.xml", rss([]))
    poll(at=later(days=3))
    assert items_of(client, api_user.headers, feed["id"]) == []


def test_paused_feeds_are_not_polled(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    upstream.serve("/feed.xml", rss([]))
    feed = make_feed(client, api_user.headers, [rss_source(upstream)], is_active=False)
    assert poll(at=later(10)) == 0
    assert upstream.seen == []
    client.patch(f"/v1/feeds/{feed['id']}", json={"is_active": True}, headers=api_user.headers)
    assert poll(at=later(10)) == 1


def test_a_claimed_feed_is_not_claimed_again_and_a_lost_lease_records_nothing(
    client: TestClient, api_user: ApiUser, upstream: Upstream, session_factory: sessionmaker[Session]
) -> None:
    upstream.serve("/feed.xml", rss([]))
    make_feed(client, api_user.headers, [rss_source(upstream)])
    lease = timedelta(minutes=5)
    at = later(1)
    with transaction(session_factory) as session:
        first = claim_due_feeds(session, at, 10, lease)
    with transaction(session_factory) as session:
        assert claim_due_feeds(session, at + timedelta(minutes=1), 10, lease) == []
    assert len(first) == 1
    # The lease runs out: another worker takes the feed, and the first worker's late result is ignored.
    with transaction(session_factory) as session:
        second = claim_due_feeds(session, at + timedelta(minutes=6), 10, lease)
    assert [c.feed_id for c in second] == [first[0].feed_id]
    with transaction(session_factory) as session:
        assert (
            record_polls(
                session,
                [FeedPollResult(first[0])],
                at + timedelta(minutes=7),
                on_new_items=enqueue_first_runs,
            )
            == 0
        )
        feed = session.get(Feed, first[0].feed_id)
        assert feed is not None and feed.lease_token == second[0].lease_token
    with transaction(session_factory) as session:
        record_polls(
            session, [FeedPollResult(second[0])], at + timedelta(minutes=7), on_new_items=enqueue_first_runs
        )
        feed = session.get(Feed, first[0].feed_id)
        assert feed is not None and feed.lease_token is None and feed.last_polled_at is not None


def test_two_pollers_at_once_poll_each_feed_once(
    upstream: Upstream, settings: Settings, engine: Engine
) -> None:
    """Two workers with their own connections, on committed rows: every feed is fetched once."""
    now = utcnow()
    with Session(engine) as session:
        user = create_user(session, email="pollers@example.com", name="P")
        account_id = user.account_id
        for n in range(8):
            upstream.route(
                f"/f{n}.xml", slow(0.2, respond(rss([(f"x{n}", "X", now + timedelta(minutes=1))])))
            )
            feed = Feed(id=new_ulid(), account_id=account_id, user_id=user.id, name=f"F{n}", next_poll_at=now)
            session.add(feed)
            session.flush()
            item = SourceInput.model_validate({"spec": {"kind": "rss", "url": upstream.url(f"/f{n}.xml")}})
            replace_sources(session, feed, [item], dry_run=False, now=now)
        session.commit()
    at = later(2)
    factory = (make_write_session_factory if is_sqlite_url(settings.database_url) else make_session_factory)(
        engine
    )

    async def both() -> list[int]:
        pollers = [
            FeedPoller(settings, factory, on_new_items=enqueue_first_runs, clock=lambda: at) for _ in range(2)
        ]
        try:
            return list(await asyncio.gather(*(p.drain() for p in pollers)))
        finally:
            for p in pollers:
                await p.aclose()

    try:
        counts = asyncio.run(both())
        assert sum(counts) == 8
        assert sorted(s.path for s in upstream.seen) == sorted(f"/f{n}.xml" for n in range(8))
        with Session(engine) as session:
            assert (
                session.scalar(
                    select(func.count()).select_from(FeedItem).where(FeedItem.account_id == account_id)
                )
                == 8
            )
    finally:
        with Session(engine) as session:
            session.execute(delete(Account).where(Account.id == account_id))
            session.commit()


def test_removing_a_source_keeps_its_items(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll, db: Session
) -> None:
    upstream.serve("/feed.xml", rss([("a", "A", utcnow() + timedelta(minutes=1))]))
    feed = make_feed(client, api_user.headers, [rss_source(upstream)])
    poll(at=later(2))
    client.put(f"/v1/feeds/{feed['id']}/sources", json=[], headers=api_user.headers)
    assert db.scalars(select(Source)).all() == []
    items = items_of(client, api_user.headers, feed["id"])
    assert [i["external_id"] for i in items] == ["a"]
    assert items[0]["source_label"] == "Local"
