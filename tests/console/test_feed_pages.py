"""The console's Feeds in-process: the pages render, and their forms go through the /v1 feed service (the
same validation messages, the same rows as the API makes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fastapi.testclient import TestClient

from tests.authroutes.conftest import SAME_ORIGIN, Person, sign_in


def test_the_console_sends_strangers_to_sign_in_and_back(
    make_client: Callable[..., TestClient], person: Person
) -> None:
    client = make_client()
    response = client.get("/console/feeds?after=x")
    assert response.status_code == 303
    assert response.headers["location"] == "/account/sign-in?next=%2Fconsole%2Ffeeds%3Fafter%3Dx"


def test_create_preview_edit_pause_and_delete_a_feed(console: TestClient) -> None:
    page = console.get("/console/feeds")
    assert page.status_code == 200, page.text
    assert "You have no feeds yet." in page.text
    assert page.headers["cache-control"] == "no-store"
    form = {"name": "Reading", "source_kind": "rss", "url": "http://127.0.0.1:9/feed.xml"}
    preview = console.post("/console/feeds/new", data={**form, "action": "preview"})
    assert preview.status_code == 200, preview.text
    assert "Preview: nothing is saved yet" in preview.text
    assert "http://127.0.0.1:9/feed.xml" in preview.text
    assert "You have no feeds yet." in console.get("/console/feeds").text

    refused = console.post("/console/feeds/new", data={**form, "url": "ftp://x", "action": "create"})
    assert refused.status_code == 400
    assert "sources[0].spec.url: Must be an http or https URL." in refused.text

    created = console.post("/console/feeds/new", data={**form, "action": "create"})
    assert created.status_code == 303, created.text
    feed_path = created.headers["location"]
    feed_id = feed_path.rsplit("/", 1)[1]
    api = console.get(f"/v1/feeds/{feed_id}").json()
    assert api["name"] == "Reading" and api["sources"][0]["spec"]["url"] == "http://127.0.0.1:9/feed.xml"

    shown = console.get(feed_path)
    assert "No items yet" in shown.text and "Pause" in shown.text
    listed = console.get("/console/feeds")
    assert f'href="/console/feeds/{feed_id}"' in listed.text

    edited = console.post(
        f"{feed_path}/edit",
        data={"name": "Reading list", "poll_interval_seconds": "600", "retention_days": "7"},
    )
    assert edited.status_code == 303
    api = console.get(f"/v1/feeds/{feed_id}").json()
    assert (api["name"], api["poll_interval_seconds"], api["data"]["retention_days"]) == (
        "Reading list",
        600,
        7,
    )
    bad = console.post(
        f"{feed_path}/edit", data={"name": " ", "poll_interval_seconds": "0", "retention_days": "7"}
    )
    assert bad.status_code == 400 and "Must not be blank" in bad.text

    added = console.post(
        f"{feed_path}/sources", data={"source_kind": "forum_community", "community": "python"}
    )
    assert added.status_code == 303
    sources = console.get(f"/v1/feeds/{feed_id}/sources").json()["sources"]
    assert [s["display"] for s in sources] == ["http://127.0.0.1:9/feed.xml", "r/python"]
    removed = console.post(f"{feed_path}/sources/{sources[0]['id']}/remove")
    assert removed.status_code == 303
    assert [s["display"] for s in console.get(f"/v1/feeds/{feed_id}/sources").json()["sources"]] == [
        "r/python"
    ]

    assert console.post(f"{feed_path}/active", data={"is_active": "false"}).status_code == 303
    assert console.get(f"/v1/feeds/{feed_id}").json()["is_active"] is False
    assert "Resume" in console.get(feed_path).text

    assert console.post(f"{feed_path}/delete").status_code == 303
    assert console.get(f"/v1/feeds/{feed_id}").status_code == 404


def test_a_cross_site_post_is_refused(console: TestClient) -> None:
    response = console.post(
        "/console/feeds/new",
        data={"name": "x", "source_kind": "rss", "url": "http://127.0.0.1:9/f", "action": "create"},
        headers={"Origin": "https://evil.example"},
    )
    assert response.status_code == 403
    assert console.get("/v1/feeds").json()["items"] == []


def test_the_assets_are_served_with_long_cache_headers(console: TestClient) -> None:
    page = console.get("/console/feeds").text
    script = page.split('<script src="', 1)[1].split('"', 1)[0]
    response = console.get(script)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["content-type"].startswith("text/javascript")
    assert console.get("/console/assets/../pages.py").status_code == 404


def test_an_unknown_console_page_and_another_accounts_feed_are_html_404s(
    console: TestClient, make_client: Callable[..., TestClient], make_person: Callable[..., Person]
) -> None:
    missing = console.get("/console/nowhere")
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
    other = make_client(outbound_allow_private=True)
    sign_in(other, make_person("someone_else"))
    other.headers.update(SAME_ORIGIN)
    made = other.post(
        "/console/feeds/new",
        data={"name": "Theirs", "source_kind": "rss", "url": "http://127.0.0.1:9/f", "action": "create"},
    )
    theirs = made.headers["location"]
    shown = console.get(theirs)
    assert shown.status_code == 404 and "No feed" in shown.text and "Theirs" not in shown.text
    assert console.post(theirs + "/delete").status_code == 404
    assert other.get(theirs).status_code == 200


def test_a_form_is_read_with_a_cap(console: TestClient) -> None:
    too_large = console.post(
        "/console/feeds/new",
        content=b"name=" + b"x" * (1024 * 1024 + 1),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert too_large.status_code == 413 and too_large.headers["content-type"].startswith("text/html")

    def chunked() -> Iterator[bytes]:
        for _ in range(20):
            yield b"x" * 65536

    streamed = console.post(
        "/console/feeds/new",
        content=chunked(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert streamed.status_code == 413
    assert console.post("/console/feeds/new", json={"name": "x"}).status_code == 415
    assert (
        console.post(
            "/console/feeds/new",
            content=b"name=%ff",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        ).status_code
        == 400
    )
    with_nul = console.post(
        "/console/feeds/new",
        data={"name": "Nul\x00l", "source_kind": "rss", "url": "http://127.0.0.1:9/f", "action": "preview"},
    )
    assert with_nul.status_code == 200 and 'value="Null"' in with_nul.text
