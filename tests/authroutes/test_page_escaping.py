"""Every value a person or a client supplies is escaped on the account, device and OAuth pages: the
signed-in name, the `next` path, a typed username, token names, a typed device code, the OAuth client's
name and the authorization request's parameters. A value breaking out of its text or attribute would show
here as a raw `<b>` or `"` in the page."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from tests.authroutes.conftest import SAME_ORIGIN, Person

HOSTILE = "<b>x</b>\"'&"
ESCAPED = "&lt;b&gt;x&lt;/b&gt;&quot;&#x27;&amp;"


def signed_in(client: TestClient, person: Person) -> None:
    answer = client.post(
        "/account/sign-in",
        data={"username": person.username, "password": person.password, "next": "/account/tokens"},
        headers=SAME_ORIGIN,
    )
    assert answer.status_code == 303, answer.text


def test_the_sign_in_page_escapes_the_next_path_and_the_typed_username(auth_client: TestClient) -> None:
    page = auth_client.get("/account/sign-in", params={"next": "/account/tokens?q=" + HOSTILE})
    assert page.status_code == 200
    assert f'name="next" value="/account/tokens?q={ESCAPED}"' in page.text
    assert "<b>x</b>" not in page.text
    refused = auth_client.post(
        "/account/sign-in",
        data={"username": HOSTILE + "\x00", "password": "wrong password", "next": "/"},
        headers=SAME_ORIGIN,
    )
    assert refused.status_code == 401
    # NUL cannot be written out as HTML: the username comes back without it.
    assert f'name="username" value="{ESCAPED}"' in refused.text
    assert "<b>x</b>" not in refused.text and "\x00" not in refused.text


def test_the_tokens_page_escapes_token_names_and_the_signed_in_name(
    auth_client: TestClient, make_person: Callable[..., Person]
) -> None:
    person = make_person("esc.person", display_username=HOSTILE)
    signed_in(auth_client, person)
    created = auth_client.post("/account/tokens", data={"name": HOSTILE}, headers=SAME_ORIGIN)
    assert created.status_code == 201, created.text
    listed = auth_client.get("/account/tokens").text
    for page in (created.text, listed):
        assert f"Signed in as <strong>{ESCAPED}</strong>" in page
        assert f"<td>{ESCAPED}</td>" in page
        assert f'aria-label="Revoke {ESCAPED}"' in page
        assert "<b>x</b>" not in page
    missing = auth_client.post("/account/tokens/999999/revoke", headers=SAME_ORIGIN)
    assert missing.status_code == 404
    assert f"Signed in as <strong>{ESCAPED}</strong>" in missing.text


def test_the_device_page_escapes_the_typed_code(auth_client: TestClient, member: Person) -> None:
    signed_in(auth_client, member)
    page = auth_client.get("/account/device", params={"user_code": HOSTILE})
    assert page.status_code == 200
    assert f'name="user_code" value="{ESCAPED}"' in page.text
    refused = auth_client.post(
        "/account/device", data={"user_code": HOSTILE, "decision": "approve"}, headers=SAME_ORIGIN
    )
    assert refused.status_code >= 400 and 'role="alert"' in refused.text
    assert f'value="{ESCAPED}"' in refused.text
    assert "<b>x</b>" not in page.text + refused.text
