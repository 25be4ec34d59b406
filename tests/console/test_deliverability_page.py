"""The console's Deliverability in-process: the records of the account's sending domain with its DKIM
key, and the on-demand check through a fake resolver (published, different, missing, unreachable)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.mail.dkim_service import create_key
from app.mail.dns_records import DnsUnreachable

SECRET = "test-secret-key-that-is-long-enough-for-tests"


def test_the_records_to_publish_and_their_check_through_the_resolver(
    console: TestClient, db: Session
) -> None:
    page = console.get("/console/deliverability")
    assert page.status_code == 200, page.text
    assert '<h2 id="domain-1">example.com</h2>' in page.text
    assert "No DKIM key yet" in page.text
    key = create_key(
        db, SECRET, "example.com", selector="s1", algorithm="rsa", now=datetime(2026, 11, 1, tzinfo=UTC)
    )
    db.flush()
    page = console.get("/console/deliverability")
    assert "s1._domainkey.example.com" in page.text and key.txt_value in page.text
    assert "_dmarc.example.com" in page.text

    published = {
        "example.com": ["google-site-verification=x", "v=spf1 include:amazonses.com -all"],
        # DNS hosts split a long value into strings; the check joins them back.
        "s1._domainkey.example.com": [key.txt_value[:200] + " " + key.txt_value[200:]],
    }
    asked: list[str] = []

    async def fake(name: str) -> list[str]:
        asked.append(name)
        return published.get(name, [])

    console.app.state.txt_resolver = fake  # type: ignore[attr-defined]
    checked = console.get("/console/deliverability?check=Example.COM").text
    assert sorted(asked) == ["_dmarc.example.com", "example.com", "s1._domainkey.example.com"]
    rows = checked.split('id="check-title"', 1)[1].split("</table>", 1)[0]
    assert rows.count("published as expected") == 2 and rows.count("not published") == 1

    published["s1._domainkey.example.com"] = ["v=DKIM1; k=rsa; p=OLDKEY"]
    assert (
        "published, but not as expected: v=DKIM1; k=rsa; p=OLDKEY"
        in console.get("/console/deliverability?check=example.com").text
    )

    async def unreachable(name: str) -> list[str]:
        raise DnsUnreachable("DNS could not be reached from this server (NoNameservers).")

    console.app.state.txt_resolver = unreachable  # type: ignore[attr-defined]
    down = console.get("/console/deliverability?check=example.com")
    assert down.status_code == 200
    assert (
        "DNS could not be reached from this server (NoNameservers). What to publish is listed below"
        in down.text
    )

    bad = console.get("/console/deliverability?check=not a domain")
    assert "is not a domain name" in bad.text
