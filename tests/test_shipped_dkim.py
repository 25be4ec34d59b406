"""DKIM as an operator sets it up: `tidings dkim create` (the installed console script) makes a key while
`tidings serve` runs with its scheduler and TIDINGS_SMTP_URL pointing at an SMTP server on loopback
(aiosmtpd); a campaign from that domain reaches the server signed, and dkimpy verifies it against the TXT
record the command printed. A campaign from another domain goes unsigned. On SQLite, and on PostgreSQL
with TIDINGS_TEST_DATABASE_URL."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import dkim
import httpx
from sqlalchemy import Engine, delete

from app.models import DkimKey
from tests.processes import committed_users, environment, shipped_serve, tidings_script
from tests.shipped import add_contacts, api, created, new_list, received_with, wait_until
from tests.smtp_sink import running_sink

DOMAIN = "shipped-dkim.example"


def campaign(http: httpx.Client, list_id: int, subject: str, from_email: str) -> None:
    made = created(
        http.post(
            "/campaigns",
            json={
                "title": subject,
                "subject": subject,
                "html": "<p>Grüße, {{ first_name }}</p>"
                + '<p><a href="https://example.com/">Lire</a></p>' * 200,
                "from_name": "Zoë of Tidings",
                "from_email": from_email,
                "lists": [list_id],
            },
        )
    )
    sent = http.post(f"/campaigns/{made['id']}/send")
    assert sent.status_code == 200, sent.text


def test_a_campaign_sent_by_serve_verifies_against_the_record_dkim_create_printed(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    var = tmp_path / "var"
    try:
        with (
            committed_users(engine, "shipped-dkim@example.com") as [(_, token)],
            running_sink() as sink,
            shipped_serve(database_url, var, TIDINGS_SMTP_URL=sink.url) as served,
        ):
            made = subprocess.run(
                [tidings_script(), "dkim", "create", "--domain", DOMAIN, "--selector", "news2026"],
                env=environment(database_url, var, served.base),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert made.returncode == 0, made.stderr
            printed = dict(re.findall(r"^(name|value):\s+(.*)$", made.stdout, re.MULTILINE))
            assert printed["name"] == f"news2026._domainkey.{DOMAIN}"

            with api(served, token) as http:
                list_id = new_list(http, "Signed readers")
                add_contacts(http, list_id, ["signed1@example.org", "signed2@example.org"])
                campaign(http, list_id, "Signé ✓", f"news@{DOMAIN}")
                campaign(http, list_id, "Not signed", "news@unsigned.example")
                wait_until(
                    lambda: (
                        len(received_with(sink, "Signé ✓")) == 2
                        and len(received_with(sink, "Not signed")) == 2
                    ),
                    "both campaigns reached the SMTP server",
                    served,
                    patience=60,  # the machine may be shared and busy
                )
    finally:
        with engine.begin() as conn:
            conn.execute(delete(DkimKey).where(DkimKey.domain == DOMAIN))

    published = {f"{printed['name']}.".encode(): printed["value"].encode()}

    def dns(name: bytes, timeout: int = 5) -> bytes | None:
        return published.get(name)

    for received in received_with(sink, "Signé ✓"):
        assert received.data.startswith(b"DKIM-Signature: ")
        assert dkim.verify(received.data, dnsfunc=dns)
        assert received.message["From"] == f"Zoë of Tidings <news@{DOMAIN}>"
    for received in received_with(sink, "Not signed"):
        assert b"DKIM-Signature" not in received.data
    # A signature naming another selector finds no record: the printed one is what verifies.
    renamed = received_with(sink, "Signé ✓")[0].data.replace(b"s=news2026", b"s=other", 1)
    assert not dkim.verify(renamed, dnsfunc=dns)
