"""The public archive: off unless the account turns it on; then its sent campaigns that opted in are a
page, an Atom feed and one page each, with no reader's data (merge tags show their fallbacks, no open
pixel); everything else is 404; limited per client address."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from fastapi.testclient import TestClient

from app.kit.ratelimit import RateLimiter
from tests.conftest import ApiUser
from tests.mail.sending.conftest import Sender, campaign_with_list

ATOM = "{http://www.w3.org/2005/Atom}"
HTML = '<html><body><p>Hi {{ first_name | "reader" }} ({{ email }})</p><a href="https://example.com/a">A</a></body></html>'


def sent(client: TestClient, user: ApiUser, sender: Sender, **campaign: object) -> int:
    campaign_id = campaign_with_list(client, user.headers, ["ann@example.com"], html=HTML, **campaign)
    assert client.post(f"/campaigns/{campaign_id}/send", headers=user.headers).status_code == 200
    assert sender.drain() == 1
    return campaign_id


def test_the_archive_lists_only_sent_campaigns_that_opted_in_once_it_is_on(
    client: TestClient, api_user: ApiUser, sender: Sender, make_user: object
) -> None:
    listed = sent(client, api_user, sender, public_archive=True, subject="News for {{ first_name | 'all' }}")
    unlisted = sent(client, api_user, sender)
    draft = campaign_with_list(client, api_user.headers, [], public_archive=True)
    me = client.get("/me", headers=api_user.headers).json()
    assert me["public_archive"] is False
    assert client.get(f"/campaigns/{listed}", headers=api_user.headers).json()["public_archive"] is True
    # Off by default: nothing is public.
    assert client.get(f"/archive/{me['id']}").status_code == 404
    assert client.get(f"/archive/{me['id']}/{listed}").status_code == 404
    turned = client.patch("/me", json={"public_archive": True}, headers=api_user.headers)
    assert turned.status_code == 200 and turned.json()["public_archive"] is True

    page = client.get(f"/archive/{me['id']}")
    assert page.status_code == 200, page.text
    assert "News for all" in page.text
    assert f"/archive/{me['id']}/{listed}" in page.text
    assert f"/archive/{me['id']}/{unlisted}" not in page.text and f'/{draft}"' not in page.text

    feed = client.get(f"/archive/{me['id']}/feed.atom")
    assert feed.status_code == 200
    assert feed.headers["content-type"].startswith("application/atom+xml")
    root = ET.fromstring(feed.content)
    entries = root.findall(f"{ATOM}entry")
    assert [entry.findtext(f"{ATOM}title") for entry in entries] == ["News for all"]
    link = entries[0].find(f"{ATOM}link")
    assert link is not None and link.get("href", "").endswith(f"/archive/{me['id']}/{listed}")

    copy = client.get(f"/archive/{me['id']}/{listed}")
    assert copy.status_code == 200
    assert "Hi reader ()" in copy.text  # fallbacks: no reader's data
    assert "ann@example.com" not in copy.text and "/t/o/" not in copy.text
    for gone in (unlisted, draft, 10**6):
        assert client.get(f"/archive/{me['id']}/{gone}").status_code == 404
    for bad in ("0", "x", "99999999999", str(10**6)):
        assert client.get(f"/archive/{bad}").status_code == 404
    # Another account's archive does not show this one's campaigns.
    other = make_user("other@example.com")  # type: ignore[operator]
    other_id = client.get("/me", headers=other.headers).json()["id"]
    client.patch("/me", json={"public_archive": True}, headers=other.headers)
    assert client.get(f"/archive/{other_id}/{listed}").status_code == 404


def test_the_archive_is_limited_per_client(client: TestClient, api_user: ApiUser) -> None:
    client.patch("/me", json={"public_archive": True}, headers=api_user.headers)
    user_id = client.get("/me", headers=api_user.headers).json()["id"]
    client.app.state.public_page_limiter = RateLimiter("2/minute", "")  # type: ignore[attr-defined]
    answers = [client.get(f"/archive/{user_id}") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert "Retry-After" in answers[-1].headers
