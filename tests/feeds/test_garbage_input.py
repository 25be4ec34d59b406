"""Garbage thrown at every /v1 feed write: whatever the body, the answer is a 4xx in the /v1 error
shape (never a 5xx) and a refused request stores nothing; what is accepted can be polled."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.models import Feed, FeedItem, Source, TelemetrySetting
from tests.conftest import ApiUser
from tests.feeds.conftest import Poll, make_feed
from tests.upstream import Upstream

# orjson reads JSON nested up to 1,024 deep; deeper is "not JSON" at once.
NESTED_LIST = b"[" * 1000 + b"]" * 1000
NESTED_OBJECT = b'{"a":' * 1000 + b"1" + b"}" * 1000
GARBAGE: list[bytes] = [
    b"",
    b"null",
    b"42",
    b"{",
    b"\xff\xfe\x00",
    b'{"name": "\xff"}',
    b'{"name": "\\ud800"}',
    NESTED_LIST,
    NESTED_OBJECT,
    b'{"name": "x", "data": {"default_field_map": ' + NESTED_OBJECT + b"}}",
    b'{"name": "x", "sources": [' + NESTED_LIST + b"]}",
    b'{"name": "x", "data": {"default_field_map": {"a\\u0000": "title"}}}',
    b'{"name": "x", "sources": [{"spec": {"kind": "board_feed"}, "meta": {"\\u0000": "x"}}]}',
    b'{"name": "x", "sources": [{"spec": {"kind": "board_feed"}, "field_map": {"t\\u0000": "x"}}]}',
    b'{"name": "x", "sources": [{"spec": {"kind": "board_feed"}, '
    b'"last_event_at": "0001-01-01T00:00:00+14:00"}]}',
    b'{"name": "x", "sources": [{"spec": {"kind": "rss", "url": "http://example.com:99999/"}}]}',
    b'{"name": "x", "sources": [{"spec": {"kind": "rss", "url": "http://example.com:-1/"}}]}',
    b'{"name": "x", "poll_interval_seconds": 1e999}',
]


def counts(db: Session) -> tuple[int, ...]:
    db.expire_all()
    return tuple(
        db.scalar(select(func.count()).select_from(model)) or 0
        for model in (Feed, Source, FeedItem, TelemetrySetting)
    )


@pytest.mark.parametrize("raw", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_to_every_feed_write_is_never_a_5xx_and_a_refusal_stores_nothing(
    client: TestClient, api_user: ApiUser, db: Session, raw: bytes
) -> None:
    feed = make_feed(client, api_user.headers, [{"spec": {"kind": "board_feed"}}])
    writes = [
        ("POST", "/v1/feeds"),
        ("PUT", f"/v1/feeds/{feed['id']}"),
        ("PATCH", f"/v1/feeds/{feed['id']}"),
        ("POST", f"/v1/feeds/{feed['id']}/sources"),
        ("PUT", f"/v1/feeds/{feed['id']}/sources"),
        ("PUT", "/v1/telemetry"),
    ]
    headers = {**api_user.headers, "Content-Type": "application/json"}
    for method, path in writes:
        before = counts(db)
        response = client.request(method, path, content=raw, headers=headers)
        assert response.status_code < 500, (method, path, response.status_code, response.text[:300])
        if method == "POST" and path == "/v1/feeds":
            # None of these is a feed (an object without `sources` is an empty source set, as in
            # openmagpie, so the sources routes may take some of them).
            assert response.status_code == 400, response.text[:300]
        if response.status_code >= 400:
            assert set(response.json()) == {"error", "detail"}
            assert counts(db) == before, (method, path)


def test_a_nul_in_a_map_key_is_named(client: TestClient, api_user: ApiUser) -> None:
    response = client.post(
        "/v1/feeds",
        json={"name": "x", "sources": [{"spec": {"kind": "board_feed"}, "meta": {"te\x00am": "a"}}]},
        headers=api_user.headers,
    )
    assert response.status_code == 400
    assert response.json()["detail"] == {
        "sources[0].meta.te\x00am": ["Text must not contain NUL characters."]
    }


@pytest.mark.parametrize("url", ["http://example.com:99999/feed", "http://example.com:-1/feed"])
def test_an_rss_url_with_an_impossible_port_is_refused(
    client: TestClient, api_user: ApiUser, url: str
) -> None:
    response = client.post(
        "/v1/feeds",
        json={"name": "x", "sources": [{"spec": {"kind": "rss", "url": url}}]},
        headers=api_user.headers,
    )
    assert response.status_code == 400
    assert "sources[0].spec.url" in response.json()["detail"]


def test_the_earliest_backfill_start_is_accepted_and_polled(
    client: TestClient, api_user: ApiUser, upstream: Upstream, poll: Poll
) -> None:
    """A start in year 1 is a past moment (backfill from then): stored, and the poll asks from the
    retention bound instead of failing on date arithmetic."""
    upstream.serve(
        "/hn/api/v1/search_by_date", b'{"hits": [], "nbPages": 0}', **{"Content-Type": "application/json"}
    )
    source = {"spec": {"kind": "board_comment", "query": "sqlite"}, "last_event_at": "0001-01-01T00:00:00Z"}
    feed = make_feed(client, api_user.headers, [source])
    assert feed["sources"][0]["last_event_at"] == "0001-01-01T00:00:00.000000Z"
    assert poll() == 1
    asked = upstream.requests_to("/hn/api/v1/search_by_date")
    assert len(asked) == 1
    view = client.get(f"/v1/feeds/{feed['id']}", headers=api_user.headers).json()
    assert view["consecutive_failures"] == 0, view["last_error"]
