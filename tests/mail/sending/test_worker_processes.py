"""Several `tidings worker` processes share one campaign on a real database without sending anything
twice (PostgreSQL: SKIP LOCKED; SQLite: one writer at a time)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.models import Deliverable
from tests.mail.sending.conftest import RECIPIENTS, SmtpSink


def test_three_workers_send_each_recipient_exactly_once(
    database_url: str,
    engine: Engine,
    committed_campaign: tuple[int, int],
    smtp_sink: SmtpSink,
    tmp_path: Path,
) -> None:
    _, campaign_id = committed_campaign
    env = {
        **os.environ,
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_VAR_DIR": str(tmp_path / "var"),
        "TIDINGS_SECRET_KEY": "worker-test-secret-key-long-enough-to-sign",
        "TIDINGS_SMTP_URL": smtp_sink.url,
        "TIDINGS_SEND_BATCH_SIZE": "20",
    }
    command = [sys.executable, "-c", "from app.cli import main; main()", "worker", "--once"]
    workers = [subprocess.Popen(command, env=env, stderr=subprocess.PIPE) for _ in range(3)]
    for worker in workers:
        _, stderr = worker.communicate(timeout=120)
        assert worker.returncode == 0, stderr.decode()[-3000:]
        assert b"Traceback" not in stderr, stderr.decode()[-3000:]
    per_recipient = Counter(address for message in smtp_sink.received for address in message.recipients)
    assert len(per_recipient) == RECIPIENTS
    assert set(per_recipient.values()) == {1}
    with Session(engine) as session:
        states = dict(
            session.execute(
                select(Deliverable.state, func.count())
                .where(Deliverable.campaign_id == campaign_id)
                .group_by(Deliverable.state)
            ).all()
        )
    assert states == {"sent": RECIPIENTS}
