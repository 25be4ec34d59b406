"""Who may call the email API: bearer tokens (401 otherwise), paid plans (403 for free, /me aside),
and the per-user rate limit with its X-RateLimit-* headers and the 429 with Retry-After."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.identity.token_lookup import CachedTokenLookup, SessionTokenLookup
from app.identity.tokens import create_personal_token
from app.main import create_app
from app.models import Account, Contact, ContactList, PersonalToken, User
from tests.conftest import ApiUser

UNAUTHENTICATED = {"message": "Unauthenticated."}
# The 403 names the command that changes the plan, for the caller's own email.
PAID_PLAN_REQUIRED = (
    "API access requires a paid plan (lifetime or empire): the server's operator grants one with "
    "`tidings users update {email} --plan empire`."
)

# Every route of the email API, with ids that need not exist: access is decided before the lookup.
ROUTES = [
    ("GET", "/me"),
    ("PATCH", "/me"),
    ("GET", "/contacts"),
    ("POST", "/contacts"),
    ("POST", "/contacts/batch"),
    ("GET", "/contacts/unsubscribed"),
    ("GET", "/contacts/1"),
    ("PATCH", "/contacts/1"),
    ("DELETE", "/contacts/1"),
    ("GET", "/contacts/1/activity"),
    ("PATCH", "/unsubscribe"),
    ("GET", "/lists"),
    ("POST", "/lists"),
    ("GET", "/lists/1"),
    ("DELETE", "/lists/1"),
    ("GET", "/lists/1/contacts"),
    ("DELETE", "/lists/1/contacts/1"),
    ("GET", "/campaigns"),
    ("POST", "/campaigns"),
    ("GET", "/campaigns/1"),
    ("PATCH", "/campaigns/1"),
    ("DELETE", "/campaigns/1"),
    ("POST", "/campaigns/1/send"),
    ("GET", "/campaigns/1/stats"),
    ("GET", "/campaigns/1/check"),
    ("GET", "/campaigns/1/preview"),
    ("GET", "/campaigns/1/report"),
    ("POST", "/campaigns/1/test"),
    ("POST", "/campaigns/1/pause"),
    ("POST", "/campaigns/1/resume"),
    ("POST", "/campaigns/1/cancel"),
    ("POST", "/campaigns/1/unschedule"),
    ("GET", "/automations"),
    ("POST", "/automations"),
    ("GET", "/automations/1"),
    ("PATCH", "/automations/1"),
    ("DELETE", "/automations/1"),
    ("POST", "/automations/1/emails"),
    ("PATCH", "/automation-emails/1"),
    ("GET", "/forms"),
    ("GET", "/forms/1"),
    ("GET", "/contact-fields"),
    ("GET", "/suppressions"),
    ("POST", "/suppressions"),
    ("DELETE", "/suppressions/a@b.c"),
    ("GET", "/webhooks"),
    ("POST", "/webhooks"),
    ("GET", "/webhooks/1"),
    ("DELETE", "/webhooks/1"),
    ("GET", "/webhooks/1/deliveries"),
    ("POST", "/webhooks/1/rotate-secret"),
]
PAID_ROUTES = [route for route in ROUTES if route != ("GET", "/me")]
ROUTE_IDS = [f"{method} {path}" for method, path in ROUTES]
PAID_ROUTE_IDS = [f"{method} {path}" for method, path in PAID_ROUTES]
LIST_ROUTES = [
    "/contacts",
    "/contacts/unsubscribed",
    "/lists",
    "/campaigns",
    "/automations",
    "/forms",
    "/suppressions",
]


def call(client: TestClient, method: str, path: str, headers: dict[str, str]) -> Any:
    """A request with a plausible body, so a route that got past authentication would not fail on input."""
    body = {"email": "ann@example.com", "name": "List", "title": "T"} if method in ("POST", "PATCH") else None
    return client.request(method, path, json=body, headers=headers)


def test_the_route_table_covers_the_whole_email_api(app: Any) -> None:
    documented = {
        (
            method.upper(),
            re.sub(r"\{(list_id|contact_id|webhook_id|id)\}", "1", path).replace("{email}", "a@b.c"),
        )
        for path, operations in app.openapi()["paths"].items()
        # The providers' bounce webhooks authenticate their own way (test_provider_webhooks.py).
        if not path.startswith(("/v1", "/api/auth", "/healthz", "/webhooks/bounces/"))
        for method in operations
    }
    assert documented == set(ROUTES)


# 401 --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=ROUTE_IDS)
def test_every_route_without_a_token_is_401(client: TestClient, method: str, path: str) -> None:
    response = call(client, method, path, {})
    assert response.status_code == 401
    assert response.json() == UNAUTHENTICATED


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=ROUTE_IDS)
def test_every_route_with_an_unknown_token_is_401(
    client: TestClient, api_user: ApiUser, method: str, path: str
) -> None:
    response = call(client, method, path, {"Authorization": f"Bearer {api_user.token}x"})
    assert response.status_code == 401
    assert response.json() == UNAUTHENTICATED


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer",
        "Bearer ",
        "Bearer    ",
        "Basic dXNlcjpwYXNz",
        "Token {token}",
        "{token}",
        "Bearer{token}",
        "Bearer not-a-tidings-token",
        "Bearer tdg_",
    ],
)
def test_malformed_authorization_headers_are_401(client: TestClient, api_user: ApiUser, header: str) -> None:
    for method, path in (("GET", "/me"), ("GET", "/contacts"), ("POST", "/contacts")):
        response = call(client, method, path, {"Authorization": header.format(token=api_user.token)})
        assert response.status_code == 401, (header, path)
        assert response.json() == UNAUTHENTICATED


def test_an_unauthenticated_write_changes_nothing(client: TestClient, api_user: ApiUser, db: Session) -> None:
    response = client.post(
        "/contacts", json={"email": "ann@example.com"}, headers={"Authorization": "Bearer x"}
    )
    assert response.status_code == 401
    assert db.scalar(select(func.count()).select_from(Contact)) == 0


def test_a_revoked_token_is_401_within_the_cache_time(
    client: TestClient, api_user: ApiUser, db: Session
) -> None:
    assert client.get("/me", headers=api_user.headers).status_code == 200
    db.execute(
        update(PersonalToken).where(PersonalToken.user_id == api_user.user_id).values(revoked_at=func.now())
    )
    db.commit()
    # A write looks the token up afresh at once...
    response = client.post("/lists", json={"name": "x"}, headers=api_user.headers)
    assert response.status_code == 401
    assert response.json() == UNAUTHENTICATED
    # ...and a read no later than the principal cache's time to live.
    time.sleep(CachedTokenLookup(SessionTokenLookup(sessionmaker())).ttl + 0.05)
    response = client.get("/me", headers=api_user.headers)
    assert response.status_code == 401
    assert response.json() == UNAUTHENTICATED


def test_reads_see_the_callers_own_writes_at_once(client: TestClient, api_user: ApiUser) -> None:
    assert client.get("/me", headers=api_user.headers).json()["contacts_count"] == 0
    client.post("/contacts", json={"email": "fresh@example.com"}, headers=api_user.headers)
    assert client.get("/me", headers=api_user.headers).json()["contacts_count"] == 1


def test_the_bearer_scheme_is_case_insensitive(client: TestClient, api_user: ApiUser) -> None:
    response = client.get("/me", headers={"Authorization": f"bearer {api_user.token}"})
    assert response.status_code == 200
    assert response.json()["id"] == api_user.user_id


def test_a_non_integer_id_without_a_token_is_still_401(client: TestClient) -> None:
    response = client.get("/contacts/abc")
    assert response.status_code == 401
    assert response.json() == UNAUTHENTICATED


def test_a_token_acts_for_its_own_user(client: TestClient, make_user: Any) -> None:
    ann = make_user("ann@example.com", name="Ann")
    bob = make_user("bob@example.com", name="Bob")
    me = client.get("/me", headers=ann.headers).json()
    assert (me["id"], me["email"], me["name"]) == (ann.user_id, "ann@example.com", "Ann")
    assert client.get("/me", headers=bob.headers).json()["id"] == bob.user_id


# plans ------------------------------------------------------------------------------------------------------


def test_free_plan_may_read_me(client: TestClient, make_user: Any) -> None:
    free = make_user(plan="free", contact_limit=250)
    response = client.get("/me", headers=free.headers)
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == free.user_id
    assert body["email"] == free.email
    assert body["contact_limit"] == 250
    assert body["contacts_count"] == 0


@pytest.mark.parametrize(("method", "path"), PAID_ROUTES, ids=PAID_ROUTE_IDS)
def test_free_plan_gets_403_everywhere_else(
    client: TestClient, make_user: Any, method: str, path: str
) -> None:
    free = make_user(plan="free")
    response = call(client, method, path, free.headers)
    assert response.status_code == 403
    assert response.json() == {"message": PAID_PLAN_REQUIRED.format(email=free.email)}


def test_free_plan_writes_change_nothing(client: TestClient, make_user: Any, db: Session) -> None:
    free = make_user(plan="free")
    assert (
        client.post("/contacts", json={"email": "ann@example.com"}, headers=free.headers).status_code == 403
    )
    assert client.post("/lists", json={"name": "News"}, headers=free.headers).status_code == 403
    assert (
        client.post("/contacts/batch", json={"contacts": [{"email": "b@example.com"}]}, headers=free.headers)
    ).status_code == 403
    assert db.scalar(select(func.count()).select_from(Contact)) == 0
    assert db.scalar(select(func.count()).select_from(ContactList)) == 0


@pytest.mark.parametrize("plan", ["lifetime", "empire"])
def test_paid_plans_use_the_api(client: TestClient, make_user: Any, plan: str) -> None:
    user = make_user(plan=plan)
    for path in ["/me", *LIST_ROUTES, "/contact-fields"]:
        response = client.get(path, headers=user.headers)
        assert response.status_code == 200, (path, response.text)
    created = client.post("/contacts", json={"email": "ann@example.com"}, headers=user.headers)
    assert created.status_code == 200
    assert client.get(f"/contacts/{created.json()['id']}", headers=user.headers).status_code == 200
    assert client.post("/lists", json={"name": "News"}, headers=user.headers).status_code == 200


def test_a_plan_change_applies_to_the_next_write_and_then_to_reads(
    client: TestClient, make_user: Any, db: Session
) -> None:
    user = make_user(plan="free")
    assert client.get("/contacts", headers=user.headers).status_code == 403
    account_id = db.scalars(select(User.account_id).where(User.id == user.user_id)).one()
    db.execute(update(Account).where(Account.id == account_id).values(plan="lifetime"))
    db.commit()
    # Writes look the account up afresh (reads may be served from the one-second principal cache).
    assert client.post("/lists", json={"name": "Paid now"}, headers=user.headers).status_code == 200
    assert client.get("/contacts", headers=user.headers).status_code == 200


# rate limit -------------------------------------------------------------------------------------------------


@pytest.fixture
def limited_client(settings: Settings, session_factory: sessionmaker[Session]) -> Iterator[TestClient]:
    """The app with a limit of 3 requests a minute per user."""
    app = create_app(
        settings=settings.model_copy(update={"mail_rate_limit": "3/minute"}), session_factory=session_factory
    )
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def rate_headers(response: Any) -> tuple[str | None, str | None]:
    return response.headers.get("X-RateLimit-Limit"), response.headers.get("X-RateLimit-Remaining")


def test_successful_responses_carry_the_rate_headers(limited_client: TestClient, api_user: ApiUser) -> None:
    remaining = []
    for _ in range(3):
        response = limited_client.get("/me", headers=api_user.headers)
        assert response.status_code == 200
        assert response.headers["X-RateLimit-Limit"] == "3"
        assert "Retry-After" not in response.headers
        remaining.append(response.headers["X-RateLimit-Remaining"])
    assert remaining == ["2", "1", "0"]


def test_default_limit_is_in_the_headers(client: TestClient, api_user: ApiUser) -> None:
    response = client.get("/contacts", headers=api_user.headers)
    assert rate_headers(response) == ("1000", "999")  # the test settings' limit


def test_error_responses_carry_the_rate_headers(
    limited_client: TestClient, api_user: ApiUser, make_user: Any
) -> None:
    not_found = limited_client.get("/contacts/987654", headers=api_user.headers)
    assert not_found.status_code == 404
    assert rate_headers(not_found) == ("3", "2")

    invalid = limited_client.post("/contacts", json={"email": "nope"}, headers=api_user.headers)
    assert invalid.status_code == 400
    assert rate_headers(invalid) == ("3", "1")

    unprocessable = limited_client.post("/contacts/batch", json={}, headers=api_user.headers)
    assert unprocessable.status_code == 422
    assert rate_headers(unprocessable) == ("3", "0")

    free = make_user(plan="free")
    forbidden = limited_client.get("/contacts", headers=free.headers)
    assert forbidden.status_code == 403
    assert rate_headers(forbidden) == ("3", "2")


def test_over_the_limit_is_429_with_retry_after(limited_client: TestClient, api_user: ApiUser) -> None:
    for _ in range(3):
        assert limited_client.get("/contacts", headers=api_user.headers).status_code == 200
    response = limited_client.get("/contacts", headers=api_user.headers)
    assert response.status_code == 429
    assert response.json() == {"message": "Too Many Attempts."}
    assert rate_headers(response) == ("3", "0")
    retry_after = int(response.headers["Retry-After"])
    assert 1 <= retry_after <= 61
    # Every route counts against the same limit, /me and writes included.
    assert limited_client.get("/me", headers=api_user.headers).status_code == 429
    assert (
        limited_client.post(
            "/contacts", json={"email": "a@example.com"}, headers=api_user.headers
        ).status_code
        == 429
    )


def test_a_refused_request_does_nothing(limited_client: TestClient, api_user: ApiUser, db: Session) -> None:
    for _ in range(3):
        limited_client.get("/me", headers=api_user.headers)
    response = limited_client.post("/contacts", json={"email": "ann@example.com"}, headers=api_user.headers)
    assert response.status_code == 429
    assert db.scalar(select(func.count()).select_from(Contact)) == 0


def test_the_limit_is_per_user(limited_client: TestClient, make_user: Any) -> None:
    ann = make_user()
    bob = make_user()
    for _ in range(3):
        limited_client.get("/me", headers=ann.headers)
    assert limited_client.get("/me", headers=ann.headers).status_code == 429

    response = limited_client.get("/me", headers=bob.headers)
    assert response.status_code == 200
    assert rate_headers(response) == ("3", "2")


def test_tokens_of_one_user_share_the_limit(
    limited_client: TestClient, api_user: ApiUser, session_factory: sessionmaker[Session]
) -> None:
    with session_factory() as session:
        user = session.get_one(User, api_user.user_id)
        _, second_token = create_personal_token(session, user, "second")
        session.commit()
    for _ in range(3):
        assert limited_client.get("/me", headers=api_user.headers).status_code == 200
    response = limited_client.get("/me", headers={"Authorization": f"Bearer {second_token}"})
    assert response.status_code == 429


def test_unauthenticated_requests_do_not_use_up_a_users_limit(
    limited_client: TestClient, api_user: ApiUser
) -> None:
    for _ in range(5):
        assert limited_client.get("/me", headers={"Authorization": "Bearer tdg_wrong"}).status_code == 401
    response = limited_client.get("/me", headers=api_user.headers)
    assert response.status_code == 200
    assert rate_headers(response) == ("3", "2")
