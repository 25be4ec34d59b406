"""The console in headless Chromium (Debian's `chromium`, driven by Playwright) against a real
`tidings serve` (its scheduler on) with a local RSS host, the fake language-model engine, an SMTP sink
and a webhook receiver: a feed made from a URL, a newsletter built from it with a filter whose draft
holds only the kept item, sent with its Send button; a webhook's test event seen in its delivery log;
a domain's DKIM record after `tidings dkim create`; the audience pages (home, contacts with a bulk
action, lists, fields, suppressions, forms, automations); a CSV imported with a mapped column, a
campaign written, previewed as a contact, tested, sent and read in its report (the open recorded by
the pixel), and a larger one paused and resumed while it sends; the web version of an email and the
public archive a reader opens. Every page is checked with axe (no serious or
critical violation), at 375 px wide, with no console error, and no request leaving the service. One
server for the module."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from sqlalchemy import Engine

from app.console.pages import SECTIONS
from app.db import make_write_session_factory
from app.identity.oauth.clients import register_client
from app.identity.tokens import create_personal_token
from app.kit.time import utcnow
from app.mail.dkim_service import delete_key
from app.models import Campaign, User
from tests.authroutes.live import CommittedPerson, committed_person, require
from tests.browser import CHROMIUM
from tests.fake_engine import FakeEngine, running_engine
from tests.feeds.conftest import rss
from tests.processes import SECRET_KEY, environment, shipped_serve, tidings_script
from tests.smtp_sink import SmtpSink, running_sink
from tests.upstream import Upstream, running_upstream

PASSWORD = "correct horse battery"
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
WAIT_SECONDS = 30.0
# The innermost elements reaching past the screen's right edge (what to fix when a page overflows).
WIDE_ELEMENTS = """[...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > 376 && ![...e.children].some(
      c => c.getBoundingClientRect().right > 376))
  .slice(0, 5).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className)"""


@dataclass
class Served:
    base: str
    person: CommittedPerson
    token: str
    upstream: Upstream
    engine: FakeEngine
    sink: SmtpSink
    database_url: str


@pytest.fixture(scope="module")
def served(database_url: str, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require(CHROMIUM.exists(), "the Debian package chromium is not installed")
    var_dir = tmp_path_factory.mktemp("console") / "var"
    with (
        running_upstream() as upstream,
        running_engine() as llm,
        running_sink() as sink,
        committed_person(engine, "console_walker", PASSWORD) as person,
    ):
        with make_write_session_factory(engine)() as session:
            _, token = create_personal_token(session, session.get_one(User, person.user_id))
            session.commit()
        # A first post, dated after the feed is made (a new source takes only what comes after it).
        upstream.serve(
            "/feed.xml", rss([("welcome", "Welcome post score=0.5", utcnow() + timedelta(minutes=5))])
        )
        upstream.serve("/hook", "ok", 200)
        env = {
            "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "true",
            "TIDINGS_ENGINE_BASE_URL": llm.base_url,
            "TIDINGS_SMTP_URL": sink.url,
            "TIDINGS_FEED_MIN_POLL_SECONDS": "1",
            # Slow enough that a campaign of a few hundred emails can be paused while it sends.
            "TIDINGS_SEND_RATE": "20",
        }
        with shipped_serve(database_url, var_dir, **env) as server:
            yield Served(server.base, person, token, upstream, llm, sink, database_url)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    require(CHROMIUM.exists(), "the Debian package chromium is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


class Visitor:
    """A phone-sized page that records console errors and every request that would leave loopback
    (aborted), and checks each page it lands on with axe."""

    def __init__(self, browser: Any) -> None:
        from axe_playwright_python.sync_playwright import Axe

        self.axe = Axe()
        self.context = browser.new_context(viewport={"width": 375, "height": 812})
        self.page = self.context.new_page()
        self.console_errors: list[str] = []
        self.left: list[str] = []
        self.checked: list[str] = []
        self.page.on("console", lambda message: self._console(message))
        self.page.on("pageerror", lambda error: self.console_errors.append(str(error)))
        self.page.on("response", lambda response: self._response(response))
        self.context.route("**/*", self._route)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.console_errors.append(message.text)

    def _response(self, response: Any) -> None:
        if response.status >= 400:
            self.console_errors.append(f"{response.status} {response.request.method} {response.url}")

    def _route(self, route: Any) -> None:
        url = route.request.url
        host = urlsplit(url).hostname or ""
        if url.startswith(("data:", "about:")) or host in LOOPBACK:
            route.continue_()
        else:
            self.left.append(url)
            route.abort()

    def check(self) -> None:
        """axe on the current page, and nothing wider than the 375 px screen."""
        results = self.axe.run(self.page)
        serious = [
            f"{v['id']}: {v['help']} ({[n['target'] for n in v['nodes']][:3]})"
            for v in results.response["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        assert serious == [], f"{self.page.url}: {serious}"
        overflow = self.page.evaluate("document.documentElement.scrollWidth")
        wide = self.page.evaluate(WIDE_ELEMENTS) if overflow > 375 else []
        assert overflow <= 375, f"{self.page.url} is {overflow} px wide at 375 px: {wide}"
        self.checked.append(urlsplit(self.page.url).path)

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.check()

    def click(self, name: str) -> None:
        self.page.get_by_role("button", name=name, exact=True).click()
        self.page.wait_for_load_state()
        self.check()

    def close(self) -> None:
        self.context.close()
        assert self.console_errors == []
        assert self.left == []


@pytest.fixture
def visitor(chromium: Any, served: Served) -> Iterator[Visitor]:
    made = Visitor(chromium)
    made.page.goto(f"{served.base}/console")
    made.check()  # the sign-in page the console sends a stranger to
    made.page.get_by_label("Username").fill(served.person.username)
    made.page.get_by_label("Password").fill(PASSWORD)
    made.page.get_by_role("button", name="Sign in").click()
    made.page.wait_for_selector(f"h1:has-text('{SECTIONS[0].label}')")
    made.check()
    made.open(f"{served.base}/console/feeds")
    try:
        yield made
    finally:
        made.close()


def eventually(what: Callable[[], Any], description: str) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.3)
    pytest.fail(f"not within {WAIT_SECONDS} s: {description}")


def test_a_feed_becomes_a_filtered_newsletter_in_the_browser(visitor: Visitor, served: Served) -> None:
    page, base = visitor.page, served.base
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {served.token}"})
    readers = api.post("/lists", json={"name": "Readers"}).json()["id"]
    assert api.post("/contacts", json={"email": "reader@example.net", "lists": [readers]}).status_code == 200

    visitor.check()
    page.get_by_role("link", name="New feed").click()
    visitor.check()
    page.get_by_label("Name").fill("Rust blog")
    page.get_by_label("Feed URL").fill(served.upstream.url("/feed.xml"))
    page.get_by_label("Poll every (seconds)").fill("1")
    visitor.click("Preview")
    assert "Preview: nothing is saved yet" in page.text_content("main")
    visitor.click("Create feed")
    assert page.text_content("h1") == "Rust blog"
    feed_path = urlsplit(page.url).path

    def polled() -> bool:
        page.reload()
        return "Welcome post" in (page.text_content("main") or "")

    eventually(polled, "the feed's first item on its page")
    visitor.check()

    page.get_by_role("link", name="Make a newsletter from it").click()
    visitor.check()
    page.get_by_label("Name", exact=True).fill("Rust digest")
    # The preview follows the form as it is typed (console.js asks the page's own Preview).
    page.get_by_label("Subject").fill("Fresh: {{ item.title }}")
    page.wait_for_selector("#nl-preview-subject:has-text('Fresh: Welcome post')")
    visitor.check()
    page.get_by_label("What to keep").fill("Only posts about Rust")
    page.get_by_label("Readers").check()
    page.get_by_label("How often").select_option("instant")
    page.get_by_label("a draft I review and send").check()
    visitor.click("Save the newsletter")
    assert page.text_content("h1") == "Rust digest"
    watch_path = urlsplit(page.url).path

    # Two new posts: the engine keeps the one about Rust (score 0.95) and drops the other (0.05).
    moment = utcnow() + timedelta(minutes=10)  # after the welcome post: sources keep a watermark
    served.upstream.serve(
        "/feed.xml",
        rss(
            [("rust-1", "Rust 2.0 is out score=0.95", moment), ("cake-1", "A cake recipe score=0.05", moment)]
        ),
    )

    def draft() -> Any:
        campaigns = api.get("/campaigns").json()["data"]
        return campaigns[0] if campaigns else None

    campaign = eventually(draft, "the newsletter's draft campaign")
    assert "Rust 2.0 is out" in campaign["html"] and "cake" not in campaign["html"]
    visitor.open(base + feed_path)
    assert "A cake recipe" in page.text_content("main")  # the feed holds both items
    visitor.open(base + watch_path)
    assert page.locator("svg.chart").count() == 1
    page.get_by_role("link", name="Its runs").last.click()
    visitor.check()

    def email_run() -> bool:
        page.reload()
        return f"campaign {campaign['id']}" in (page.text_content("main") or "")

    eventually(email_run, "the email action's run naming the campaign")

    # Sent from the console: the run's campaign link, Send it, then the confirmation.
    page.get_by_role("link", name=f"campaign {campaign['id']}").click()
    visitor.check()
    assert "a draft: not sent" in page.text_content("#campaign-status")
    visitor.click("Send it")
    assert "Send this campaign now?" in page.text_content("main")
    visitor.click("Yes, send it now")
    assert "a draft" not in page.text_content("#campaign-status")
    delivered = eventually(lambda: served.sink.received, "the newsletter in the SMTP sink")
    assert delivered[0].recipients == ["reader@example.net"]
    assert "Rust 2.0 is out" in delivered[0].part("html")

    for path in (
        "/console/feeds",
        "/console/watches",
        "/console/newsletter",
        "/console/engines",
        "/console/account",
    ):
        visitor.open(base + path)
    visitor.open(base + "/console/engines")
    assert "Answering" in page.text_content("main")


def test_webhook_deliveries_and_dkim_records_in_the_browser(
    visitor: Visitor, served: Served, engine: Engine, tmp_path: Path
) -> None:
    page, base = visitor.page, served.base
    visitor.open(base + "/console/webhooks")
    page.get_by_label("URL").fill(served.upstream.url("/hook"))
    page.get_by_label("contact.subscribed").check()
    visitor.click("Add endpoint")
    assert (page.text_content("#secret-value") or "").strip().startswith("whsec_")
    page.get_by_role("link", name="Open its delivery log").click()
    visitor.check()
    visitor.click("Send a test event")

    def logged() -> bool:
        page.reload()
        return "succeeded" in (page.text_content("main") or "")

    eventually(logged, "the test event's delivery in the log")
    visitor.check()
    assert served.upstream.requests_to("/hook")

    try:
        _dkim_record_is_shown(visitor, served, tmp_path)
    finally:
        with make_write_session_factory(engine)() as session:
            delete_key(session, "example.com", "console")
            session.commit()
    _a_connected_app_is_revoked_from_tokens(visitor, served, engine)


def _a_connected_app_is_revoked_from_tokens(visitor: Visitor, served: Served, engine: Engine) -> None:
    """Tokens and apps (the console's Tokens section): an app connected through OAuth's consent page is
    listed and its Revoke stops its token."""
    page, base = visitor.page, served.base
    callback = served.upstream.url("/callback")  # http on loopback: allowed for a redirect URI
    served.upstream.serve("/callback", '<!doctype html><html lang="en"><title>Back</title><p>Back</p></html>')
    with make_write_session_factory(engine)() as session:
        owner = session.get_one(User, served.person.user_id)
        client, secret = register_client(session, owner, "Console test app", [callback])
        session.commit()
        client_id = client.client_id
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": callback,
        "scope": "mail",
        "state": "console",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    visitor.open(f"{base}/oauth/authorize?{urlencode(query)}")
    page.get_by_role("button", name="Allow", exact=True).click()
    page.wait_for_url(callback + "?*")
    code = parse_qs(urlsplit(page.url).query)["code"][0]
    exchange = {"grant_type": "authorization_code", "code": code, "redirect_uri": callback}
    tokens = httpx.post(
        base + "/oauth/token", data={**exchange, "code_verifier": verifier}, auth=(client_id, secret or "")
    )
    assert tokens.status_code == 200, tokens.text
    as_app = {"Authorization": f"Bearer {tokens.json()['access_token']}"}
    assert httpx.get(base + "/campaigns", headers=as_app).status_code == 200

    visitor.open(base + "/console/account")
    page.get_by_role("link", name="Tokens", exact=True).click()  # the console's navigation
    page.wait_for_load_state()
    visitor.check()
    assert urlsplit(page.url).path == "/account/tokens"
    assert "Console test app" in (page.text_content("main") or "")
    visitor.click("Revoke Console test app")
    assert "Console test app" not in (page.text_content("main") or "")
    assert httpx.get(base + "/campaigns", headers=as_app).status_code == 401


def test_audience_pages_in_the_browser(visitor: Visitor, served: Served) -> None:
    """The contacts, with a bulk action on a selection and a contact's page; lists and fields;
    suppressions; forms; an automation with an email; home."""
    page, base = visitor.page, served.base
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {served.token}"})
    members = api.post("/lists", json={"name": "Members"}).json()["id"]
    for email in ("walk-one@example.net", "walk-two@example.net"):
        assert api.post("/contacts", json={"email": email}).status_code == 200
    visitor.open(base + "/console/contacts?q=walk-")
    page.get_by_label("Select walk-one@example.net").check()
    page.get_by_label("Select walk-two@example.net").check()
    page.get_by_label("Action").select_option("add")
    page.get_by_label("List (to add to or remove from)").select_option(str(members))
    page.once("dialog", lambda dialog: dialog.accept())
    visitor.click("Apply")
    visitor.open(f"{base}/console/contacts?list={members}")
    assert "2 contacts." in (page.text_content("main") or "")
    page.get_by_role("link", name="walk-one@example.net").click()
    visitor.check()
    page.get_by_label("First name").fill("Walker")
    visitor.click("Save")
    assert "Done: saved." in (page.text_content("main") or "")

    visitor.open(base + "/console/lists")
    visitor.open(f"{base}/console/lists/{members}/delete")
    assert "Its 2 contacts stay" in (page.text_content("main") or "")
    visitor.open(base + "/console/fields")

    visitor.open(base + "/console/suppressions")
    page.get_by_label("Addresses (one a line, at most 1000)").fill("blocked@example.net")
    visitor.click("Suppress")
    assert "added in the console" in (page.text_content("main") or "")

    visitor.open(base + "/console/forms")
    page.get_by_label("Title (shown above the form)").fill("Join the walk")
    page.get_by_label("Members").check()
    visitor.click("Create form")
    page.get_by_text("HTML to embed in your site").click()
    visitor.check()
    visitor.open(base + "/console/automations")
    page.get_by_label("Title").fill("Walk drip")
    page.get_by_label("Trigger").select_option("apply_list")
    page.get_by_label('List (for "joins a list")').select_option(str(members))
    visitor.click("Create automation")
    page.get_by_text("Add an email").click()
    page.get_by_label("Subject").fill("Welcome aboard")
    page.get_by_label("From name").fill("Walker")
    page.get_by_label("From address").fill("walker@example.com")
    page.get_by_label("HTML").fill("<p>Hello</p>")
    visitor.click("Add email")
    page.get_by_role("link", name="Welcome aboard").click()
    visitor.check()

    visitor.open(base + "/console/home")
    assert "added in the last 7 days" in (page.text_content("main") or "")


def _dkim_record_is_shown(visitor: Visitor, served: Served, tmp_path: Path) -> None:
    page, base = visitor.page, served.base
    made = subprocess.run(
        [tidings_script(), "dkim", "create", "--domain", "example.com", "--selector", "console"],
        env=environment(served.database_url, tmp_path / "var", base, TIDINGS_SECRET_KEY=SECRET_KEY),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    visitor.open(base + "/console/deliverability")
    assert "console._domainkey.example.com" in page.text_content("main")
    page.get_by_label("Check a domain's records in DNS now").fill("example.com")
    visitor.click("Check")
    # This machine has no DNS to ask: the page says so and still lists what to publish.
    shown = page.text_content("main") or ""
    assert "DNS could not be reached" in shown or "What DNS publishes for example.com" in shown


IMPORTED = "Email Address;Given name;Town\ncamp-ann@example.net;Ann;Oslo\ncamp-bo@example.net;Bo;Rome\n"
PIXEL = re.compile(r'src="(https?://[^"]+/t/o/[^"]+)"')
CLICK = re.compile(r'href="(https?://[^"]+/t/c/[^"]+)"')


def test_a_campaign_from_import_to_report_in_the_browser(
    visitor: Visitor, served: Served, engine: Engine, tmp_path: Path
) -> None:
    page, base = visitor.page, served.base
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {served.token}"})
    api.post("/lists", json={"name": "Campaign readers"}).raise_for_status()

    # Import: a semicolon-separated file, its "Email Address" read as the email, Town a new field.
    upload = tmp_path / "people.csv"
    upload.write_text(IMPORTED, encoding="utf-8")
    visitor.open(base + "/console/contacts")
    page.get_by_role("link", name="Import contacts from a CSV file").click()
    visitor.check()
    page.get_by_label("CSV file").set_input_files(str(upload))
    visitor.click("Upload")
    page.get_by_label("Town").select_option("field:town")
    page.get_by_label("Campaign readers").check()
    visitor.click("Import")
    assert (page.text_content("#import-created") or "").strip() == "2"

    # A file larger than a batch is imported in the background: its progress page, then the report.
    larger = tmp_path / "larger.csv"
    larger.write_text("email\n" + "".join(f"many-{n}@example.net\n" for n in range(2500)), encoding="utf-8")
    visitor.open(base + "/console/contacts/import")
    page.get_by_label("CSV file").set_input_files(str(larger))
    visitor.click("Upload")
    page.get_by_role("button", name="Import", exact=True).click()
    page.wait_for_load_state()
    if page.locator("#import-progress").count():
        visitor.check()  # while it runs; its script takes the person to the report at the end
    page.wait_for_selector("#import-created", timeout=WAIT_SECONDS * 1000)
    visitor.check()
    assert (page.text_content("#import-created") or "").strip() == "2500"

    # Write it, previewed as Ann as it is typed.
    visitor.open(base + "/console/campaigns")
    page.get_by_role("link", name="Write a new campaign").click()
    visitor.check()
    page.get_by_label("Title (only you see it)").fill("Walk news")
    page.get_by_label("Subject", exact=True).fill("Hi {{ first_name | friend }}")
    page.get_by_label("Campaign readers").check()
    page.get_by_label("Preview as").fill("camp-ann@example.net")
    page.get_by_label("Body", exact=True).fill(
        "<p>Hello {{ first_name }} in {{ town }}</p><p><a href='https://example.com/x'>Read</a></p>"
    )
    page.wait_for_selector("#preview-subject:has-text('Hi Ann')")
    assert "Hello Ann in Oslo" in (
        page.frame_locator("#live-preview iframe").locator("body").text_content() or ""
    )
    visitor.check()
    _screenshot(page)
    visitor.click("Save")
    campaign_path = urlsplit(page.url).path

    # A test to yourself arrives; then send, after the question.
    test_button = page.get_by_role("button", name=re.compile("^Send a test to "))
    my_address = (test_button.text_content() or "").removeprefix("Send a test to ").strip()
    test_button.click()
    page.wait_for_load_state()
    visitor.check()
    tested = eventually(lambda: served.sink.to(my_address), "the test email")
    assert str(tested[0].message["Subject"]) == "[Test] Hi friend"
    visitor.click("Send now")
    assert "Send this campaign now?" in (page.text_content("main") or "")
    visitor.click("Yes, send")
    sent = eventually(lambda: served.sink.to("camp-ann@example.net"), "Ann's email")
    assert "Hello Ann in Oslo" in sent[0].part("html")

    # The report reaches 100% (refreshed by the page itself), and an open shows once the pixel is fetched.
    visitor.open(base + campaign_path + "/report")
    page.wait_for_selector("label[for=progress-bar]:has-text('100% done')", timeout=WAIT_SECONDS * 1000)
    pixel = PIXEL.search(sent[0].part("html"))
    assert pixel is not None
    httpx.get(pixel.group(1).replace("&amp;", "&")).raise_for_status()
    click = CLICK.search(sent[0].part("html"))
    assert click is not None
    assert httpx.get(click.group(1).replace("&amp;", "&")).status_code in (302, 303, 307)
    visitor.open(base + campaign_path + "/report")
    assert (page.text_content("#open-count") or "").startswith("1 ")
    assert "https://example.com/x" in (page.text_content("#links") or "")
    assert page.locator("svg.chart").count() == 4  # sent, opens, clicks, clicks per link

    # A larger campaign, paused while it sends and resumed: it ends with every email sent once.
    many = [{"email": f"bulk-{n}@example.net"} for n in range(300)]
    bulk_list = api.post("/lists", json={"name": "Bulk"}).json()["id"]
    for item in many:
        item["lists"] = [bulk_list]
    api.post("/contacts/batch", json={"contacts": many}).raise_for_status()
    made = api.post(
        "/campaigns",
        json={
            "title": "Bulk",
            "subject": "Bulk",
            "html": "<p>Bulk {{ unsubscribe_url }}</p>",
            "from_name": "Walker",
            "from_email": "walker@example.com",
            "lists": [bulk_list],
        },
    ).json()
    bulk_path = f"/console/campaigns/{made['id']}"
    visitor.open(base + bulk_path)
    visitor.click("Send now")
    visitor.click("Yes, send")
    eventually(lambda: len(_bulk(served)) > 0, "the first bulk emails")
    visitor.click("Pause")
    visitor.click("Yes, pause")
    assert "paused" in (page.text_content("#campaign-state") or "")
    held = len(_bulk(served))
    time.sleep(1.5)
    assert len(_bulk(served)) <= held + 20  # at most what was on the wire
    assert held < 300
    visitor.click("Resume")
    visitor.click("Yes, resume")
    eventually(lambda: len(_bulk(served)) == 300, "every bulk email")
    visitor.open(base + bulk_path + "/report")
    page.wait_for_selector("label[for=progress-bar]:has-text('100% done')", timeout=WAIT_SECONDS * 1000)
    assert len(_bulk(served)) == 300

    # Another account's campaign is a 404; a cross-site form post is refused.
    cookies = {cookie["name"]: cookie["value"] for cookie in visitor.context.cookies()}
    with committed_person(engine, "other_walker", PASSWORD) as other:
        with make_write_session_factory(engine)() as session:
            theirs = Campaign(
                account_id=other.account_id,
                title="Theirs",
                subject="Theirs",
                html="<p>x</p>",
                from_name="O",
                from_email="o@example.com",
            )
            session.add(theirs)
            session.commit()
            theirs_id = theirs.id
        for path in ("", "/report"):
            assert (
                httpx.get(f"{base}/console/campaigns/{theirs_id}{path}", cookies=cookies).status_code == 404
            )
    foreign = httpx.post(
        base + campaign_path + "/control",
        data={"action": "cancel", "confirmed": "yes"},
        cookies=cookies,
        headers={"Origin": "https://evil.example"},
    )
    assert foreign.status_code == 403


def _screenshot(page: Any) -> None:
    """The README's picture (scripts/console_screenshot.sh says where): the editor beside its preview,
    at a laptop's width, then back to the phone's."""
    target = os.environ.get("TIDINGS_CONSOLE_SCREENSHOT")
    if not target:
        return
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.evaluate("window.scrollTo(0, document.querySelector('h1').offsetTop)")
    page.screenshot(path=target, full_page=False)
    page.set_viewport_size({"width": 375, "height": 812})


def _bulk(served: Served) -> list[Any]:
    return [mail for mail in served.sink.received if mail.recipients[0].startswith("bulk-")]


WEB_VERSION = re.compile(r'href="([^"]+/w/[^"]+)"')


def test_the_web_version_and_the_public_archive_in_the_browser(visitor: Visitor, served: Served) -> None:
    """What a reader opens without signing in: the "view in browser" link of an email they got, and the
    account's public archive (its page, a campaign in it, its Atom feed)."""
    page, base = visitor.page, served.base
    api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {served.token}"})
    readers = api.post("/lists", json={"name": "Archive readers"}).json()["id"]
    api.post(
        "/contacts", json={"email": "archive-reader@example.net", "first_name": "Rea", "lists": [readers]}
    ).raise_for_status()
    me = api.patch("/me", json={"public_archive": True})
    me.raise_for_status()
    made = api.post(
        "/campaigns",
        json={
            "title": "Archived",
            "subject": "News for {{ first_name | friends }}",
            "html": "<p>Hello {{ first_name | friend }}</p><p><a href='https://example.com/a'>More</a></p>",
            "from_name": "Walker",
            "from_email": "walker@example.com",
            "lists": [readers],
            "public_archive": True,
        },
    )
    made.raise_for_status()
    campaign_id = made.json()["id"]
    api.post(f"/campaigns/{campaign_id}/send").raise_for_status()
    got = eventually(lambda: served.sink.to("archive-reader@example.net"), "the reader's email")
    link = WEB_VERSION.search(got[0].part("html"))
    assert link is not None
    web_version = link.group(1).replace("&amp;", "&")

    # The email as Rea got it, a page of its own that passes the same checks as the console's.
    visitor.open(web_version)
    assert "Hello Rea" in (page.text_content("body") or "")
    forged = web_version[:-1] + ("A" if web_version[-1] != "A" else "B")
    assert httpx.get(forged).status_code == 404

    # The archive: its page links to the campaign, filled with the fallbacks (no one's name).
    user_id = me.json()["id"]
    visitor.open(f"{base}/archive/{user_id}")
    page.get_by_role("link", name="News for friends").click()
    page.wait_for_load_state()
    visitor.check()
    assert "Hello friend" in (page.text_content("body") or "")
    feed = httpx.get(f"{base}/archive/{user_id}/feed.atom")
    assert feed.status_code == 200
    assert feed.headers["content-type"].startswith("application/atom+xml")
    assert "News for friends" in feed.text
