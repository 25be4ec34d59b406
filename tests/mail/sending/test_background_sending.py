"""The embedded set-up: the app's own scheduler sends a campaign to the Maildir outbox, with no mail
server (what `tidings serve --demo` relies on)."""

from __future__ import annotations

import email
import email.policy
import mailbox
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from app.config import Settings
from app.main import create_app
from tests.processes import committed_users


@pytest.fixture
def committed_token(engine: Engine) -> Iterator[str]:
    with committed_users(engine, "outbox@example.com") as [(_, token)]:
        yield token


def test_scheduler_sends_to_the_outbox(database_url: str, tmp_path: Path, committed_token: str) -> None:
    settings = Settings(
        database_url=database_url,
        var_dir=tmp_path / "var",
        secret_key="outbox-test-secret-key-long-enough-to-sign",
        smtp_url="",
        mail_rate_limit="1000/minute",
    )
    headers = {"Authorization": f"Bearer {committed_token}"}
    with TestClient(create_app(settings)) as client:
        list_id = client.post("/lists", json={"name": "L"}, headers=headers).json()["id"]
        for address in ("one@example.com", "two@example.com"):
            client.post("/contacts", json={"email": address, "lists": [list_id]}, headers=headers)
        campaign = client.post(
            "/campaigns",
            json={
                "title": "T",
                "subject": "Outbox {{ email }}",
                "html": "<p>Hi</p>",
                "from_name": "T",
                "from_email": "news@example.com",
                "lists": [list_id],
            },
            headers=headers,
        ).json()
        assert client.post(f"/campaigns/{campaign['id']}/send", headers=headers).status_code == 200
        outbox = settings.outbox_path
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            stats = client.get(f"/campaigns/{campaign['id']}/stats", headers=headers).json()
            if stats["sent_count"] == 2:
                break
            time.sleep(0.2)
        assert stats["sent_count"] == 2
    box = mailbox.Maildir(outbox, create=False)
    subjects = sorted(
        str(email.message_from_bytes(box.get_bytes(key), policy=email.policy.default)["Subject"])
        for key in box.iterkeys()  # iterating a Mailbox yields its messages, not its keys
    )
    assert subjects == ["Outbox one@example.com", "Outbox two@example.com"]
