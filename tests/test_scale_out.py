"""The production shape on PostgreSQL: two API processes (no scheduler) and two `tidings worker`
processes. A 5,000-recipient campaign goes out through them with every email sent exactly once, and the
email API's rate limit is one limit across both API processes (shared in Redis)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.db import is_sqlite_url
from app.models import Deliverable
from tests.processes import committed_users, served_app
from tests.smtp_sink import SmtpSink

RECIPIENTS = 5000
REDIS_URL = "redis://127.0.0.1:6379/0"
RATE_LIMIT = 40


@pytest.fixture
def accounts(engine: Engine) -> Iterator[tuple[str, str]]:
    """Two committed users: one sends the campaign, one probes the rate limit."""
    with committed_users(engine, "scale-sender@example.com", "scale-prober@example.com") as made:
        yield made[0][1], made[1][1]


def test_two_api_processes_and_two_workers(
    database_url: str, engine: Engine, accounts: tuple[str, str], smtp_sink: SmtpSink, tmp_path: Path
) -> None:
    if is_sqlite_url(database_url):
        pytest.skip("PostgreSQL only: several processes on one SQLite file is not the production shape")
    sender, prober = accounts
    shared = {
        "TIDINGS_REDIS_URL": REDIS_URL,
        "TIDINGS_MAIL_RATE_LIMIT": f"{RATE_LIMIT}/minute",
        "TIDINGS_SCHEDULER": "false",
        "TIDINGS_SMTP_URL": smtp_sink.url,
    }
    worker_env = {
        **os.environ,
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_VAR_DIR": str(tmp_path / "var"),
        "TIDINGS_SECRET_KEY": "server-test-secret-key-long-enough-to-sign",
        "TIDINGS_SMTP_URL": smtp_sink.url,
    }
    with ExitStack() as stack:
        apis = [stack.enter_context(served_app(database_url, tmp_path / "var", **shared)) for _ in range(2)]
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", "from app.cli import main; main()", "worker"],
                env=worker_env,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        try:
            clients = [
                stack.enter_context(
                    httpx.Client(base_url=api, headers={"Authorization": f"Bearer {sender}"}, timeout=60)
                )
                for api in apis
            ]
            list_id = clients[0].post("/lists", json={"name": "Everyone"}).json()["id"]
            for batch in range(RECIPIENTS // 1000):
                contacts = [{"email": f"s{batch}-{n}@example.com", "lists": [list_id]} for n in range(1000)]
                body = {"contacts": contacts}
                assert clients[batch % 2].post("/contacts/batch", json=body).status_code == 200
            campaign = (
                clients[1]
                .post(
                    "/campaigns",
                    json={
                        "title": "Scale",
                        "subject": "Hello {{ first_name | 'there' }}",
                        "html": '<p>Hi</p><a href="https://example.com/">link</a>',
                        "from_name": "Scale",
                        "from_email": "news@example.com",
                        "lists": [list_id],
                    },
                )
                .json()
            )
            assert clients[0].post(f"/campaigns/{campaign['id']}/send").status_code == 200

            # One limit across both API processes: exactly RATE_LIMIT of the prober's requests pass.
            statuses = Counter(
                httpx.get(f"{apis[n % 2]}/me", headers={"Authorization": f"Bearer {prober}"}).status_code
                for n in range(RATE_LIMIT + 10)
            )
            assert statuses == {200: RATE_LIMIT, 429: 10}

            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                with Session(engine) as session:
                    done = session.scalar(
                        select(func.count()).where(
                            Deliverable.campaign_id == campaign["id"], Deliverable.state == "sent"
                        )
                    )
                if done == RECIPIENTS:
                    break
                time.sleep(0.5)
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                _, stderr = worker.communicate(timeout=30)
                assert b"Traceback" not in stderr, stderr.decode()[-3000:]
    assert done == RECIPIENTS
    per_recipient = Counter(address for message in smtp_sink.received for address in message.recipients)
    assert len(per_recipient) == RECIPIENTS
    assert set(per_recipient.values()) == {1}
