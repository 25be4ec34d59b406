"""OAuth 2.0 for the email API: the authorization code flow with PKCE (S256, required), the consent page,
code exchange and rotating refresh tokens; access tokens work as `Authorization: Bearer` on the email API.
Bad requests are clear 4xx answers that issue nothing."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.identity.oauth.clients import register_client
from app.kit.time import utcnow
from app.models import OAuthAuthorizationCode, OAuthToken, User
from tests.authroutes.conftest import SAME_ORIGIN, Person, sign_in
from tests.factories import count_rows

REDIRECT = "https://zap.example/callback"


@dataclass
class Client:
    client_id: str
    secret: str | None


@dataclass
class Pkce:
    verifier: str
    challenge: str


def pkce() -> Pkce:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return Pkce(verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode())


@pytest.fixture
def make_oauth_client(session_factory: sessionmaker[Session], staff: Person) -> Callable[..., Client]:
    def make(name: str = "Zap <Integration>", uris: list[str] | None = None, public: bool = False) -> Client:
        with session_factory() as session:
            owner = session.get_one(User, staff.user_id)
            row, secret = register_client(session, owner, name, uris or [REDIRECT], public=public)
            session.commit()
            return Client(row.client_id, secret)

    return make


@pytest.fixture
def oauth_client(make_oauth_client: Callable[..., Client]) -> Client:
    return make_oauth_client()


def authorize_query(client: Client, challenge: Pkce, **extra: str) -> dict[str, str]:
    return {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": REDIRECT,
        "scope": "mail",
        "state": "state-123",
        "code_challenge": challenge.challenge,
        "code_challenge_method": "S256",
        **extra,
    }


def approve(browser: TestClient, query: dict[str, str]) -> str:
    """Post the consent form's Allow; returns the code sent to the redirect URI."""
    response = browser.post("/oauth/authorize", data={**query, "decision": "allow"}, headers=SAME_ORIGIN)
    assert response.status_code == 303, response.text
    location = urlsplit(response.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    params = parse_qs(location.query)
    assert params["state"] == ["state-123"]
    return params["code"][0]


def exchange(http: TestClient, client: Client, code: str, verifier: str, **extra: str) -> Any:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
    }
    data.update(extra)
    auth = (client.client_id, client.secret) if client.secret else None
    if auth is None:
        data["client_id"] = client.client_id
    return http.post("/oauth/token", data=data, auth=auth)


def test_the_whole_flow_gives_a_token_for_the_email_api(
    auth_client: TestClient, oauth_client: Client, member: Person
) -> None:
    challenge = pkce()
    query = authorize_query(oauth_client, challenge)
    # Not signed in: a sign-in page, naming the client (escaped).
    page = auth_client.get("/oauth/authorize?" + urlencode(query))
    assert page.status_code == 200
    assert "Zap &lt;Integration&gt;" in page.text and "<Integration>" not in page.text
    assert 'name="password"' in page.text and 'action="/account/sign-in"' in page.text
    # Sign in through the page's form; it comes back to the authorization request.
    next_path = re.search(r'name="next" value="([^"]+)"', page.text)
    assert next_path is not None
    signed = auth_client.post(
        "/account/sign-in",
        data={
            "username": member.username,
            "password": member.password,
            "next": next_path.group(1).replace("&amp;", "&"),
        },
        headers=SAME_ORIGIN,
    )
    assert signed.status_code == 303
    consent = auth_client.get(signed.headers["location"])
    assert consent.status_code == 200
    assert "Allow" in consent.text and "Deny" in consent.text and "zap.example" in consent.text
    code = approve(auth_client, query)

    http = TestClient(auth_client.app)  # the client's server: no cookies
    token = exchange(http, oauth_client, code, challenge.verifier)
    assert token.status_code == 200, token.text
    assert token.headers["cache-control"] == "no-store"
    body = token.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["scope"] == "mail"
    assert body["access_token"].startswith("tdo_")
    assert body["refresh_token"].startswith("tdr_")
    me = http.get("/me", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert me.status_code == 200, me.text
    assert me.json()["id"] == member.user_id
    lists = http.get("/lists", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert lists.status_code == 200


def test_a_public_client_uses_pkce_alone(
    auth_client: TestClient, make_oauth_client: Callable[..., Client], member: Person
) -> None:
    client = make_oauth_client(public=True)
    assert client.secret is None
    sign_in(auth_client, member)
    challenge = pkce()
    code = approve(auth_client, authorize_query(client, challenge))
    response = exchange(TestClient(auth_client.app), client, code, challenge.verifier)
    assert response.status_code == 200, response.text


def test_deny_sends_access_denied_and_issues_nothing(
    auth_client: TestClient, oauth_client: Client, member: Person, db: Session
) -> None:
    sign_in(auth_client, member)
    query = authorize_query(oauth_client, pkce())
    response = auth_client.post("/oauth/authorize", data={**query, "decision": "deny"}, headers=SAME_ORIGIN)
    assert response.status_code == 303
    params = parse_qs(urlsplit(response.headers["location"]).query)
    assert params["error"] == ["access_denied"]
    assert params["state"] == ["state-123"]
    assert count_rows(db, OAuthAuthorizationCode) == 0


def test_a_reused_code_is_refused_and_revokes_what_it_gave(
    auth_client: TestClient, oauth_client: Client, member: Person
) -> None:
    sign_in(auth_client, member)
    challenge = pkce()
    code = approve(auth_client, authorize_query(oauth_client, challenge))
    http = TestClient(auth_client.app)
    first = exchange(http, oauth_client, code, challenge.verifier).json()
    again = exchange(http, oauth_client, code, challenge.verifier)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    assert http.get("/me", headers={"Authorization": f"Bearer {first['access_token']}"}).status_code == 401
    refreshed = http.post(
        "/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": first["refresh_token"]},
        auth=(oauth_client.client_id, oauth_client.secret or ""),
    )
    assert refreshed.status_code == 400


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"code_verifier": "w" * 43}, "invalid_grant"),  # the wrong verifier
        ({"code_verifier": ""}, "invalid_request"),
        ({"code_verifier": "short"}, "invalid_request"),
        ({"redirect_uri": "https://zap.example/other"}, "invalid_grant"),
        ({"code": "not-a-code"}, "invalid_grant"),
        ({"grant_type": "password"}, "unsupported_grant_type"),
        ({"grant_type": "client_credentials"}, "unsupported_grant_type"),
    ],
)
def test_a_bad_exchange_is_refused_and_issues_nothing(
    auth_client: TestClient,
    oauth_client: Client,
    member: Person,
    db: Session,
    change: dict[str, str],
    error: str,
) -> None:
    sign_in(auth_client, member)
    challenge = pkce()
    code = approve(auth_client, authorize_query(oauth_client, challenge))
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT}
    data["code_verifier"] = challenge.verifier
    data.update(change)
    response = TestClient(auth_client.app).post(
        "/oauth/token", data=data, auth=(oauth_client.client_id, oauth_client.secret or "")
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"] == error
    assert count_rows(db, OAuthToken) == 0


def test_a_wrong_client_secret_is_401(
    auth_client: TestClient, oauth_client: Client, member: Person, db: Session
) -> None:
    sign_in(auth_client, member)
    challenge = pkce()
    code = approve(auth_client, authorize_query(oauth_client, challenge))
    wrong = Client(oauth_client.client_id, "not-the-secret")
    response = exchange(TestClient(auth_client.app), wrong, code, challenge.verifier)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    # A confidential client cannot pass as a public one either.
    response = exchange(
        TestClient(auth_client.app), Client(oauth_client.client_id, None), code, challenge.verifier
    )
    assert response.status_code in (400, 401)
    assert response.json()["error"] == "invalid_client"
    assert count_rows(db, OAuthToken) == 0


def test_an_expired_code_is_refused(
    auth_client: TestClient, oauth_client: Client, member: Person, db: Session
) -> None:
    sign_in(auth_client, member)
    challenge = pkce()
    code = approve(auth_client, authorize_query(oauth_client, challenge))
    db.execute(update(OAuthAuthorizationCode).values(expires_at=utcnow()))
    db.commit()
    response = exchange(TestClient(auth_client.app), oauth_client, code, challenge.verifier)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


def test_refresh_rotates_and_a_replayed_refresh_token_revokes_the_chain(
    auth_client: TestClient, oauth_client: Client, member: Person
) -> None:
    sign_in(auth_client, member)
    challenge = pkce()
    code = approve(auth_client, authorize_query(oauth_client, challenge))
    http = TestClient(auth_client.app)
    first = exchange(http, oauth_client, code, challenge.verifier).json()
    secret = oauth_client.secret or ""

    def refresh(token: str) -> Any:
        return http.post(
            "/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": token,
                "client_id": oauth_client.client_id,
                "client_secret": secret,
            },
        )

    second = refresh(first["refresh_token"])
    assert second.status_code == 200, second.text
    new = second.json()
    assert new["refresh_token"] != first["refresh_token"]
    bearer = {"Authorization": f"Bearer {new['access_token']}"}
    assert http.get("/me", headers=bearer).status_code == 200
    assert http.get("/me", headers={"Authorization": f"Bearer {first['access_token']}"}).status_code == 401
    # The old refresh token again: someone else holds it; everything of the chain goes.
    replay = refresh(first["refresh_token"])
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    assert http.get("/me", headers=bearer).status_code == 401
    assert refresh(new["refresh_token"]).status_code == 400


def test_an_expired_access_token_is_401(
    auth_client: TestClient, oauth_client: Client, member: Person, db: Session
) -> None:
    sign_in(auth_client, member)
    challenge = pkce()
    code = approve(auth_client, authorize_query(oauth_client, challenge))
    http = TestClient(auth_client.app)
    token = exchange(http, oauth_client, code, challenge.verifier).json()["access_token"]
    db.execute(update(OAuthToken).values(access_expires_at=utcnow()))
    db.commit()
    assert http.get("/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def alert_of(html: str) -> str:
    found = re.search(r'role="alert">([^<]*)<', html)
    return found.group(1) if found else ""


@pytest.mark.parametrize(
    "change",
    [
        {"redirect_uri": "https://evil.example/callback"},
        {"redirect_uri": REDIRECT + "/extra"},
        {"redirect_uri": "https://zap.example/callback\u00e9"},
        {"redirect_uri": 'https://zap.example/"><script>'},
        {"client_id": "unknown"},
        {"client_id": ""},
        {"client_id": "x" * 5000},
    ],
)
def test_an_unverifiable_client_or_redirect_uri_gets_a_page_never_a_redirect(
    auth_client: TestClient, oauth_client: Client, member: Person, change: dict[str, str]
) -> None:
    sign_in(auth_client, member)
    query = authorize_query(oauth_client, pkce(), **change)
    response = auth_client.get("/oauth/authorize?" + urlencode(query))
    assert response.status_code == 400, response.text
    assert "location" not in response.headers
    assert alert_of(response.text)
    assert "<script>" not in response.text
    posted = auth_client.post("/oauth/authorize", data={**query, "decision": "allow"}, headers=SAME_ORIGIN)
    assert posted.status_code == 400
    assert "location" not in posted.headers


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": ""}, "invalid_request"),
        ({"code_challenge": "short"}, "invalid_request"),
        ({"scope": "admin"}, "invalid_scope"),
        ({"response_type": "token"}, "unsupported_response_type"),
    ],
)
def test_a_bad_request_from_a_known_client_is_sent_back_to_it(
    auth_client: TestClient,
    oauth_client: Client,
    member: Person,
    db: Session,
    change: dict[str, str],
    error: str,
) -> None:
    sign_in(auth_client, member)
    query = authorize_query(oauth_client, pkce(), **change)
    response = auth_client.get("/oauth/authorize?" + urlencode(query))
    assert response.status_code == 302, response.text
    location = urlsplit(response.headers["location"])
    assert location.netloc == "zap.example"
    assert parse_qs(location.query)["error"] == [error]
    assert count_rows(db, OAuthAuthorizationCode) == 0


def test_the_decision_needs_a_session_and_this_services_origin(
    auth_client: TestClient, oauth_client: Client, member: Person, db: Session
) -> None:
    query = authorize_query(oauth_client, pkce())
    response = auth_client.post("/oauth/authorize", data={**query, "decision": "allow"})
    assert response.status_code == 401
    assert 'name="password"' in response.text
    sign_in(auth_client, member)
    response = auth_client.post(
        "/oauth/authorize", data={**query, "decision": "allow"}, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403
    response = auth_client.post("/oauth/authorize", data={**query, "decision": "maybe"}, headers=SAME_ORIGIN)
    assert response.status_code == 400
    assert count_rows(db, OAuthAuthorizationCode) == 0


@pytest.mark.parametrize(
    ("content", "content_type", "headers"),
    [
        (b"", "application/x-www-form-urlencoded", {}),
        (b'{"grant_type": "authorization_code"}', "application/json", {}),
        (b"\xff\xfe garbage", "application/x-www-form-urlencoded", {}),
        (
            b"grant_type=authorization_code&code=x",
            "application/x-www-form-urlencoded",
            {"Authorization": "Basic !!!"},
        ),
        (
            b"grant_type=authorization_code&code=x",
            "application/x-www-form-urlencoded",
            {"Authorization": "Basic /w=="},
        ),
        (
            b"grant_type=refresh_token&refresh_token=x&client_id=nobody",
            "application/x-www-form-urlencoded",
            {},
        ),
        (b"grant_type=authorization_code&grant_type=refresh_token", "application/x-www-form-urlencoded", {}),
    ],
)
def test_garbage_at_the_token_endpoint_is_a_clear_4xx(
    auth_client: TestClient, content: bytes, content_type: str, headers: dict[str, str]
) -> None:
    response = auth_client.post(
        "/oauth/token", content=content, headers={"content-type": content_type, **headers}
    )
    assert 400 <= response.status_code < 500, response.text
    assert "error" in response.json()


HOSTILE = "<b>x</b>\"'&"
ESCAPED = "&lt;b&gt;x&lt;/b&gt;&quot;&#x27;&amp;"


def test_the_oauth_pages_escape_the_client_name_and_the_request_parameters(
    auth_client: TestClient, make_oauth_client: Callable[..., Client], member: Person
) -> None:
    client = make_oauth_client(name=HOSTILE)
    query = authorize_query(client, pkce(), state=HOSTILE)
    sign_in_page = auth_client.get("/oauth/authorize?" + urlencode(query))
    assert sign_in_page.status_code == 200
    assert f"<strong>{ESCAPED}</strong> asks for access" in sign_in_page.text
    sign_in(auth_client, member)
    consent = auth_client.get("/oauth/authorize?" + urlencode(query))
    assert consent.status_code == 200, consent.text
    assert f"<h1>Allow {ESCAPED} to use your Tidings account?</h1>" in consent.text
    assert f'<input type="hidden" name="state" value="{ESCAPED}">' in consent.text
    assert "<b>x</b>" not in sign_in_page.text + consent.text


def connect(browser: TestClient, client: Client) -> dict[str, Any]:
    """The person (signed in on `browser`) lets the client in; returns the client's token answer."""
    challenge = pkce()
    code = approve(browser, authorize_query(client, challenge))
    answer = exchange(TestClient(browser.app), client, code, challenge.verifier)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def works(http: TestClient, access_token: str) -> bool:
    return http.get("/me", headers={"Authorization": f"Bearer {access_token}"}).status_code == 200


def test_the_tokens_page_lists_connected_apps_and_revoke_disconnects_one(
    auth_client: TestClient, make_oauth_client: Callable[..., Client], member: Person
) -> None:
    """The consent page says access lasts "until you revoke it": this is where the person does."""
    zap, other = make_oauth_client(), make_oauth_client(name="Other app")
    sign_in(auth_client, member)
    page = auth_client.get("/account/tokens")
    assert "You have not connected any app." in page.text
    zap_token, other_token = connect(auth_client, zap), connect(auth_client, other)
    http = TestClient(auth_client.app)
    refreshed = http.post(
        "/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": zap_token["refresh_token"]},
        auth=(zap.client_id, zap.secret or ""),
    ).json()
    page = auth_client.get("/account/tokens")
    assert "Zap &lt;Integration&gt;" in page.text and "Other app" in page.text
    action = f'action="/account/tokens/apps/{zap.client_id}/revoke"'
    assert page.text.count(action) == 1  # once, whatever the refreshes
    # A cookie form: another site's page cannot post it.
    path = f"/account/tokens/apps/{zap.client_id}/revoke"
    forged = auth_client.post(path, headers={"Origin": "https://evil.example"})
    assert forged.status_code == 403
    assert works(http, refreshed["access_token"])
    revoked = auth_client.post(path, headers=SAME_ORIGIN)
    assert revoked.status_code == 303 and revoked.headers["location"] == "/account/tokens"
    assert not works(http, refreshed["access_token"])
    again = http.post(
        "/oauth/token",
        data={"grant_type": "refresh_token", "refresh_token": refreshed["refresh_token"]},
        auth=(zap.client_id, zap.secret or ""),
    )
    assert again.status_code == 400
    assert works(http, other_token["access_token"])  # the other app stays connected
    page = auth_client.get("/account/tokens")
    assert "Zap &lt;Integration&gt;" not in page.text and "Other app" in page.text
    # Nothing left to revoke, or an app of nobody: 404, nothing changes.
    assert auth_client.post(path, headers=SAME_ORIGIN).status_code == 404
    assert auth_client.post("/account/tokens/apps/no-such-app/revoke", headers=SAME_ORIGIN).status_code == 404


def test_an_integration_revokes_its_token_by_rfc_7009(
    auth_client: TestClient, make_oauth_client: Callable[..., Client], member: Person
) -> None:
    confidential, public = make_oauth_client(), make_oauth_client(name="Phone app", public=True)
    sign_in(auth_client, member)
    http = TestClient(auth_client.app)
    # A confidential client authenticates as at the token endpoint; revoking the refresh token revokes
    # the access token of the same grant too.
    token = connect(auth_client, confidential)
    basic = (confidential.client_id, confidential.secret or "")
    answer = http.post(
        "/oauth/revoke",
        data={"token": token["refresh_token"], "token_type_hint": "refresh_token"},
        auth=basic,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {} and answer.headers["cache-control"] == "no-store"
    assert not works(http, token["access_token"])
    # Revoked already, or never issued: 200 all the same (RFC 7009 2.2).
    assert http.post("/oauth/revoke", data={"token": token["access_token"]}, auth=basic).status_code == 200
    assert http.post("/oauth/revoke", data={"token": "tdo_nonsense"}, auth=basic).status_code == 200
    # A public client names itself; an access token given up takes its grant's refresh token along.
    phone = connect(auth_client, public)
    mine = http.post("/oauth/revoke", data={"token": phone["access_token"], "client_id": public.client_id})
    assert mine.status_code == 200, mine.text
    refreshed = http.post(
        "/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": phone["refresh_token"],
            "client_id": public.client_id,
        },
    )
    assert refreshed.status_code == 400
    # A client cannot revoke another's token, a wrong secret is 401, no token is 400.
    other = connect(auth_client, confidential)
    theirs = http.post("/oauth/revoke", data={"token": other["access_token"], "client_id": public.client_id})
    assert theirs.status_code == 400 and theirs.json()["error"] == "invalid_grant"
    assert works(http, other["access_token"])
    wrong = http.post(
        "/oauth/revoke", data={"token": other["access_token"]}, auth=(confidential.client_id, "x")
    )
    assert wrong.status_code == 401
    assert http.post("/oauth/revoke", data={}, auth=basic).json()["error"] == "invalid_request"
    assert http.post("/oauth/revoke", json={"token": other["access_token"]}, auth=basic).status_code == 400
    assert works(http, other["access_token"])
