"""/docs and GET /: Swagger UI served from the installed package (never a CDN) over the three OpenAPI
documents, shown in a headless Chromium that may reach loopback only; and the home page's links."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi.testclient import TestClient

from tests.processes import served_app

# What each document's first screen must show: one operation of that interface.
INTERFACES = {
    "Email API (SendFox-compatible)": "/contacts",
    "Feeds and watches, /v1 (openmagpie-compatible)": "/v1/feeds",
    "Account auth, /api/auth (better-auth-compatible)": "/api/auth/sign-in/username",
}
DOCUMENTS = ("/openapi.yaml", "/v1/openapi.yaml", "/api/auth/openapi.yaml")


def test_docs_load_every_file_from_this_service(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sources, page.text
    for source in sources:
        assert source.startswith("/"), f"{source} is not a file of this service"
        assert client.get(source).status_code == 200, source
    assert "//" not in "".join(sources)
    for document in DOCUMENTS:
        assert f'"url": "{document}"' in page.text
        assert client.get(document).status_code == 200
    init = client.get("/docs/init.js")
    assert init.headers["content-type"].startswith("text/javascript")
    assert "validatorUrl: null" in init.text  # never the public validator
    bundle = client.get("/docs/assets/swagger-ui-bundle.js")
    assert bundle.headers["content-type"].startswith("text/javascript") and len(bundle.content) > 100_000


def test_fastapi_s_cdn_pages_are_gone(client: TestClient) -> None:
    assert client.get("/redoc").status_code == 404
    assert client.get("/docs/assets/../../app/main.py").status_code == 404
    assert client.get("/docs/assets/nothing.js").status_code == 404


def test_the_home_page_links_to_the_docs_and_the_three_documents(client: TestClient) -> None:
    home = client.get("/")
    assert home.status_code == 200
    assert home.headers["content-type"].startswith("text/html")
    assert "<title>Tidings</title>" in home.text
    links = re.findall(r'href="([^"]+)"', home.text)
    assert "/docs" in links
    for document in DOCUMENTS:
        assert document in links
    for link in links:
        assert client.get(link, follow_redirects=False).status_code in (200, 303), link
    assert "<script" not in home.text


def test_links_carry_the_prefix_a_proxy_adds(app: Any) -> None:
    prefixed = TestClient(app, root_path="/tidings")
    docs = prefixed.get("/docs").text
    assert 'src="/tidings/docs/assets/swagger-ui-bundle.js"' in docs
    assert '"url": "/tidings/v1/openapi.yaml"' in docs
    assert 'href="/tidings/docs"' in prefixed.get("/").text


def test_docs_show_all_three_interfaces_with_no_network_beyond_loopback(
    browser: Any, database_url: str, tmp_path: Path
) -> None:
    with served_app(database_url, tmp_path / "var") as base:
        context = browser.new_context()
        outside: list[str] = []

        def loopback_only(route: Any) -> None:
            if urlsplit(route.request.url).hostname == "127.0.0.1":
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        context.route("**/*", loopback_only)
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(f"{base}/docs")
        chooser = page.get_by_label("Select a definition")
        for number, (name, path) in enumerate(INTERFACES.items()):
            if number:
                chooser.select_option(label=name)
            operation = page.locator(f".opblock-summary-path[data-path='{path}']")
            operation.first.wait_for(state="visible", timeout=15_000)
            page.screenshot(path=str(tmp_path / f"docs-{number}.png"))
        assert outside == []
        assert problems == []
        context.close()
