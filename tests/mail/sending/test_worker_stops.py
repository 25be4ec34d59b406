"""A `tidings worker` records each email the relay accepted within moments, not at the end of its batch
(so a crash re-sends only what was on the wire), and a graceful stop (SIGTERM, as `docker compose stop`
sends) finishes the emails on the wire, records them and puts the rest of its batches back: no row stays
`sending` and nothing is sent twice."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from app.models import Deliverable
from tests.mail.sending.conftest import RECIPIENTS, SmtpSink
from tests.processes import environment, free_port, tidings_script
from tests.shipped import wait_until


def send_env(database_url: str, sink: SmtpSink, var_dir: Path, port: int, **settings: str) -> dict[str, str]:
    base = f"http://127.0.0.1:{port}"
    return environment(
        database_url, var_dir, base, TIDINGS_SMTP_URL=sink.url, TIDINGS_SEND_CONCURRENCY="8", **settings
    )


def states(engine: Engine, campaign_id: int) -> dict[str, int]:
    with Session(engine) as session:
        return dict(
            session.execute(
                select(Deliverable.state, func.count())
                .where(Deliverable.campaign_id == campaign_id)
                .group_by(Deliverable.state)
            ).all()
        )


def per_recipient(sink: SmtpSink) -> Counter[str]:
    with sink.lock:
        return Counter(address for message in sink.received for address in message.recipients)


def finish(worker: subprocess.Popen[bytes]) -> str:
    _, stderr = worker.communicate(timeout=60)
    log = stderr.decode()
    assert "Traceback" not in log, log[-3000:]
    return log


def test_accepted_emails_are_recorded_while_their_batch_is_still_sending(
    database_url: str,
    engine: Engine,
    committed_campaign: tuple[int, int],
    smtp_sink: SmtpSink,
    tmp_path: Path,
) -> None:
    _, campaign_id = committed_campaign
    smtp_sink.hold_after = 40  # then the relay keeps the next emails waiting
    env = send_env(
        database_url,
        smtp_sink,
        tmp_path / "var",
        free_port(),
        TIDINGS_SEND_BATCH_SIZE="200",
        TIDINGS_SEND_LANES="1",
    )
    worker = subprocess.Popen([tidings_script(), "worker"], env=env, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: len(smtp_sink.received) >= 40, "the relay accepted 40")
        # The batch of 200 is far from done, yet all 40 accepted emails are recorded as sent.
        wait_until(
            lambda: states(engine, campaign_id).get("sent", 0) == 40, "40 recorded as sent", patience=5
        )
        assert states(engine, campaign_id)["sending"] == 200 - 40
        smtp_sink.holding = False
        wait_until(lambda: states(engine, campaign_id) == {"sent": RECIPIENTS}, "all sent", patience=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        finish(worker)
    counts = per_recipient(smtp_sink)
    assert len(counts) == RECIPIENTS and set(counts.values()) == {1}


@pytest.mark.parametrize("process", ["worker", "serve"])
def test_sigterm_finishes_what_is_on_the_wire_and_puts_the_rest_back(
    process: str,
    database_url: str,
    engine: Engine,
    committed_campaign: tuple[int, int],
    smtp_sink: SmtpSink,
    tmp_path: Path,
) -> None:
    _, campaign_id = committed_campaign
    smtp_sink.hold_after = 40
    port = free_port()
    env = send_env(
        database_url, smtp_sink, tmp_path / "var", port, TIDINGS_SEND_BATCH_SIZE="50", TIDINGS_SEND_LANES="2"
    )
    # `tidings serve` runs the same send lanes in its scheduler, on uvloop, and stops them on SIGTERM too.
    command = (
        [tidings_script(), "worker"]
        if process == "worker"
        else [tidings_script(), "serve", "--port", str(port)]
    )
    worker = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    wait_until(lambda: len(smtp_sink.received) >= 40, "the relay accepted 40", patience=60)
    time.sleep(0.3)  # the next emails are on the wire, waiting for the relay's answer
    assert states(engine, campaign_id).get("sending", 0) > 0
    worker.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    smtp_sink.holding = False  # the relay answers the emails on the wire
    finish(worker)
    # uvicorn shuts down gracefully, then re-raises the signal it caught, as a process stopped by it.
    assert worker.returncode == (0 if process == "worker" else -signal.SIGTERM)

    after_stop = states(engine, campaign_id)
    assert "sending" not in after_stop, after_stop
    accepted = len(smtp_sink.received)
    assert accepted > 40  # those on the wire were finished, not dropped
    assert after_stop == {"sent": accepted, "queued": RECIPIENTS - accepted}
    with Session(engine) as session:
        given_back = session.scalars(
            select(func.max(Deliverable.attempts)).where(
                Deliverable.campaign_id == campaign_id, Deliverable.state == "queued"
            )
        ).one()
    assert given_back == 0  # a put-back email was never attempted

    # The next worker sends the rest, and nothing twice.
    rest = subprocess.Popen([tidings_script(), "worker", "--once"], env=env, stderr=subprocess.PIPE)
    finish(rest)
    assert rest.returncode == 0
    assert states(engine, campaign_id) == {"sent": RECIPIENTS}
    counts = per_recipient(smtp_sink)
    assert len(counts) == RECIPIENTS and set(counts.values()) == {1}
