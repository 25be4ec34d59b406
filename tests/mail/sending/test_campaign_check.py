"""The lint before send (GET /campaigns/{id}/check, and its errors at POST /campaigns/{id}/send), and
unsigned mail: a From domain without a DKIM key is sent with a warning logged once per domain and
campaign and shown in the campaign's view, or refused under TIDINGS_ENV=production unless the relay
signs."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.kit.time import utcnow
from app.mail import dkim_service
from app.mail.campaigns.campaign_check import spf_aligned
from app.mail.sending.dkim import DkimSigner
from app.mail.sending.worker import SendConfig, SendWorker
from app.main import create_app
from tests.conftest import ApiUser, no_dns
from tests.mail.sending.conftest import Sender, SmtpSink, campaign_with_list
from tests.mail.sending.emails import deliverables_of

SIGNED_DOMAIN = "signed.example.com"
CLEAN_HTML = '<p>Hello {{ first_name | "there" }}, read <a href="https://example.com/a">this</a>.</p>'
MESSY_HTML = (
    '<p>Hi {{ shoe_size }} {{ city }} {{ nickname | "friend" }}</p><a href="http://[broken">x</a>'
    '<a href="https://{{ city }}.example.com/">local</a><img src="https://example.com/a.png">'
    '<img src="https://example.com/spacer.gif" alt=""><img src="https://example.com/b.png" alt="Logo">'
    + "<!-- padding -->"
    * 7000
)


def check(client: TestClient, user: ApiUser, campaign_id: int) -> dict[str, Any]:
    response = client.get(f"/campaigns/{campaign_id}/check", headers=user.headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def codes(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(finding["code"], finding["severity"]) for finding in answer["findings"]]


def add_key(session_factory: sessionmaker[Session], settings: Settings, domain: str) -> None:
    with session_factory() as session:
        dkim_service.create_key(
            session, settings.resolved_secret_key, domain, selector=None, algorithm="ed25519", now=utcnow()
        )
        session.commit()


def test_a_clean_campaign_with_a_signed_domain_has_no_finding(
    client: TestClient, api_user: ApiUser, settings: Settings, session_factory: sessionmaker[Session]
) -> None:
    add_key(session_factory, settings, SIGNED_DOMAIN)
    campaign_id = campaign_with_list(
        client, api_user.headers, ["ann@example.com"], html=CLEAN_HTML, from_email=f"news@{SIGNED_DOMAIN}"
    )
    assert check(client, api_user, campaign_id) == {"findings": [], "sendable": True}


def test_each_problem_is_a_finding_and_errors_block_the_send(client: TestClient, api_user: ApiUser) -> None:
    # A custom field the account has: {{ city }} is filled, {{ shoe_size }} is not.
    created = client.post(
        "/contacts",
        json={"email": "bob@example.com", "contact_fields": [{"name": "city", "value": "Lyon"}]},
        headers=api_user.headers,
    )
    assert created.status_code in (200, 201), created.text
    campaign_id = campaign_with_list(client, api_user.headers, ["ann@example.com"], html=MESSY_HTML)
    answer = check(client, api_user, campaign_id)
    assert codes(answer) == [
        ("link_unparseable", "error"),
        ("dkim_key_missing", "warning"),
        ("html_clipped", "warning"),
        ("merge_tag_unknown", "warning"),
        ("image_alt_missing", "warning"),
    ]
    assert answer["sendable"] is False
    messages = {finding["code"]: finding["message"] for finding in answer["findings"]}
    assert "http://[broken" in messages["link_unparseable"]
    assert "{{ shoe_size }}" in messages["merge_tag_unknown"] and "city" not in messages["merge_tag_unknown"]
    assert messages["image_alt_missing"].startswith("1 image without alt text")
    assert "tidings dkim create --domain example.com" in messages["dkim_key_missing"]
    refused = client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers)
    assert refused.status_code == 400, refused.text
    assert list(refused.json()["errors"]) == ["link_unparseable"]
    # Fixed, the warnings alone do not block it.
    fixed = MESSY_HTML.replace("http://[broken", "https://example.com/b")
    patched = client.patch(f"/campaigns/{campaign_id}", json={"html": fixed}, headers=api_user.headers)
    assert patched.status_code == 200, patched.text
    assert check(client, api_user, campaign_id)["sendable"] is True
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200


def test_when_dns_answers_the_check_reads_spf_dkim_and_dmarc(
    client: TestClient,
    app: Any,
    api_user: ApiUser,
    settings: Settings,
    session_factory: sessionmaker[Session],
) -> None:
    add_key(session_factory, settings, SIGNED_DOMAIN)
    with session_factory() as session:
        [key] = dkim_service.list_keys(session, SIGNED_DOMAIN)
    published: dict[str, list[str]] = {}
    asked: list[str] = []

    async def fake(name: str) -> list[str]:
        asked.append(name)
        return published.get(name, [])

    app.state.txt_resolver = fake
    campaign_id = campaign_with_list(
        client, api_user.headers, ["ann@example.com"], html=CLEAN_HTML, from_email=f"news@{SIGNED_DOMAIN}"
    )
    answer = check(client, api_user, campaign_id)
    assert sorted(asked) == sorted([SIGNED_DOMAIN, key.dns_name, f"_dmarc.{SIGNED_DOMAIN}"])
    assert codes(answer) == [
        ("spf_missing", "warning"),
        ("dkim_record_missing", "warning"),
        ("dmarc_missing", "warning"),
    ]
    assert answer["sendable"] is True  # DNS findings never block a send
    published[SIGNED_DOMAIN] = ["google-site-verification=x", "v=spf1 include:amazonses.com -all"]
    published[key.dns_name] = ["v=DKIM1; k=ed25519; p=SOMEOTHERKEY"]
    published[f"_dmarc.{SIGNED_DOMAIN}"] = ["v=DMARC1; p=none"]
    answer = check(client, api_user, campaign_id)
    assert codes(answer) == [("dkim_record_different", "warning")]
    assert f"tidings dkim show --domain {SIGNED_DOMAIN}" in answer["findings"][0]["message"]
    published[key.dns_name] = [key.txt_value]
    assert check(client, api_user, campaign_id) == {"findings": [], "sendable": True}

    async def slow(name: str) -> list[str]:
        await asyncio.sleep(30)
        return []

    app.state.txt_resolver = slow  # DNS that does not answer in time says nothing
    assert check(client, api_user, campaign_id) == {"findings": [], "sendable": True}


def test_the_bounce_domain_must_align_with_the_from_domain_for_spf(
    settings: Settings, session_factory: sessionmaker[Session], api_user: ApiUser
) -> None:
    app = create_app(
        settings=settings.model_copy(update={"bounce_domain": "bounces.elsewhere.org"}),
        session_factory=session_factory,
    )

    async def everything_published(name: str) -> list[str]:
        return ["v=spf1 -all", "v=DMARC1; p=reject"]

    app.state.txt_resolver = everything_published
    with TestClient(app) as client:
        campaign_id = campaign_with_list(client, api_user.headers, ["ann@example.com"], html=CLEAN_HTML)
        answer = check(client, api_user, campaign_id)
    assert codes(answer) == [("dkim_key_missing", "warning"), ("spf_not_aligned", "warning")]
    assert "bounces.elsewhere.org" in answer["findings"][1]["message"]


@pytest.mark.parametrize(
    ("envelope", "sender", "strict", "aligned"),
    [
        ("example.com", "example.com", True, True),
        ("bounces.example.com", "example.com", False, True),
        ("bounces.example.com", "news.example.com", False, True),
        ("bounces.example.com", "example.com", True, False),
        ("bounces.example.org", "example.com", False, False),
        ("example.net", "example.com", False, False),
    ],
)
def test_spf_alignment(envelope: str, sender: str, strict: bool, aligned: bool) -> None:
    assert spf_aligned(envelope, sender, strict=strict) is aligned


def test_an_image_only_email_has_an_empty_text_part(client: TestClient, api_user: ApiUser) -> None:
    campaign_id = campaign_with_list(
        client,
        api_user.headers,
        ["ann@example.com"],
        html='<a href="https://example.com/"><img src="x.png"></a>',
    )
    assert ("text_part_empty", "warning") in codes(check(client, api_user, campaign_id))


def test_another_accounts_campaign_is_404(client: TestClient, api_user: ApiUser, make_user: Any) -> None:
    campaign_id = campaign_with_list(client, api_user.headers, ["ann@example.com"])
    other = make_user()
    assert client.get(f"/campaigns/{campaign_id}/check", headers=other.headers).status_code == 404


@pytest.mark.parametrize("relay_signs", [False, True])
def test_production_refuses_to_send_unsigned_unless_the_relay_signs(
    settings: Settings, session_factory: sessionmaker[Session], api_user: ApiUser, relay_signs: bool
) -> None:
    production = settings.model_copy(
        update={"env": "production", "relay_signs": relay_signs, "base_url": "https://mail.example.com"}
    )
    app = create_app(settings=production, session_factory=session_factory)
    app.state.txt_resolver = no_dns
    with TestClient(app) as client:
        campaign_id = campaign_with_list(client, api_user.headers, ["ann@example.com"], html=CLEAN_HTML)
        answer = check(client, api_user, campaign_id)
        sent = client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers)
    if relay_signs:
        assert answer == {"findings": [], "sendable": True}
        assert sent.status_code == 200, sent.text
    else:
        assert codes(answer) == [("dkim_key_missing", "error")]
        assert sent.status_code == 400 and list(sent.json()["errors"]) == ["dkim_key_missing"]


def worker_with_dkim(
    settings: Settings, session_factory: sessionmaker[Session], sender: Sender
) -> SendWorker:
    return SendWorker(
        SendConfig.from_settings(settings),
        session_factory,
        sender.transport,
        sender.tokens,
        dkim=DkimSigner(settings.resolved_secret_key),
    )


def drain(worker: SendWorker, sender: Sender) -> int:
    async def run() -> int:
        try:
            return await worker.drain()
        finally:
            await sender.transport.close()

    return asyncio.run(run())


def test_unsigned_mail_is_logged_once_per_domain_and_campaign_and_shown_in_its_view(
    client: TestClient,
    api_user: ApiUser,
    settings: Settings,
    session_factory: sessionmaker[Session],
    sender: Sender,
    smtp_sink: SmtpSink,
    caplog: pytest.LogCaptureFixture,
) -> None:
    add_key(session_factory, settings, SIGNED_DOMAIN)
    unsigned = campaign_with_list(
        client, api_user.headers, ["ann@example.com", "bob@example.com"], html=CLEAN_HTML
    )
    signed = campaign_with_list(
        client, api_user.headers, ["cy@example.com"], html=CLEAN_HTML, from_email=f"news@{SIGNED_DOMAIN}"
    )
    for campaign_id in (unsigned, signed):
        assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    worker = worker_with_dkim(settings.model_copy(update={"send_batch_size": 1}), session_factory, sender)
    with caplog.at_level(logging.WARNING, logger="tidings"):  # one email a batch: the warning once still
        assert drain(worker, sender) == 3
    warnings = [r.getMessage() for r in caplog.records if "sent unsigned" in r.getMessage()]
    assert warnings == [
        f"campaign {unsigned}: sent unsigned: example.com has no DKIM key, so its email fails DMARC "
        "alignment through DKIM (tidings dkim create --domain example.com)"
    ]
    assert len(smtp_sink.received) == 3
    assert [b"DKIM-Signature" in r.data for r in sorted(smtp_sink.received, key=lambda r: r.recipients)] == [
        False,
        False,
        True,
    ]
    view = client.get(f"/campaigns/{unsigned}", headers=api_user.headers).json()
    assert view["send_warning"].startswith("sent unsigned: example.com has no DKIM key")
    assert client.get(f"/campaigns/{signed}", headers=api_user.headers).json()["send_warning"] is None


def test_production_workers_fail_unsigned_email_instead_of_sending_it(
    client: TestClient,
    api_user: ApiUser,
    settings: Settings,
    session_factory: sessionmaker[Session],
    sender: Sender,
    smtp_sink: SmtpSink,
    db: Session,
) -> None:
    # Scheduled while a key existed, or an automation: the worker is the last line.
    campaign_id = campaign_with_list(client, api_user.headers, ["ann@example.com"], html=CLEAN_HTML)
    assert client.post(f"/campaigns/{campaign_id}/send", headers=api_user.headers).status_code == 200
    worker = worker_with_dkim(settings.model_copy(update={"env": "production"}), session_factory, sender)
    drain(worker, sender)
    assert smtp_sink.received == []
    row = deliverables_of(db, "ann@example.com")[0]
    assert row.state == "failed"
    view = client.get(f"/campaigns/{campaign_id}", headers=api_user.headers).json()
    assert view["send_warning"].startswith("not sent: example.com has no DKIM key")
