"""The console's Engines, Tokens and Account pages in-process."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.models import Account
from tests.authroutes.conftest import Person


def test_with_no_engine_the_page_says_why_a_filter_cannot_be_added_and_what_to_set(
    console: TestClient,
) -> None:
    page = console.get("/console/engines")
    assert page.status_code == 200, page.text
    api = console.get("/v1/engines").json()["items"]
    default = api[0]
    assert default["available"] is False
    assert f"Not available: {default['unreachable_reason']}" in page.text
    assert default["how_to_fix"] in page.text and "TIDINGS_ENGINE_BASE_URL" in page.text


def test_the_tokens_section_is_the_account_tokens_page(console: TestClient) -> None:
    assert console.get("/console/tokens").headers["location"] == "/account/tokens"
    assert '<a href="/account/tokens">Tokens</a>' in console.get("/console/account").text


def test_the_account_page_shows_the_plan_and_limits_as_they_apply_now(
    console: TestClient, person: Person, db: Session
) -> None:
    account = db.get_one(Account, person.account_id)
    account.daily_send_limit = 250
    db.flush()
    page = console.get("/console/account").text
    assert "console_user" in page and "UTC" in page and "empire" in page
    assert "250 emails a day (set for this account); 0 sent today" in page
    assert "Warm-up</dt><dd>done" in page
