"""An SMTP relay that does not answer is said at once: `tidings worker` and `tidings serve` log one
WARNING as they start, naming TIDINGS_SMTP_URL's host and port and why, instead of leaving campaigns to
sit in `sending` with the reason only in later log lines. (The campaign's own view carries its last
delivery error: tests/mail/sending/test_queue.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.processes import command_environment, free_port, shipped_serve, tidings_script
from tests.smtp_sink import SmtpSink


def relay_warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if "WARNING" in line and "TIDINGS_SMTP_URL" in line]


def worker_once(tmp_path: Path, smtp_url: str) -> subprocess.CompletedProcess[str]:
    env = command_environment(
        TIDINGS_DATABASE_URL=f"sqlite:///{tmp_path / 'tidings.db'}",
        TIDINGS_VAR_DIR=str(tmp_path / "var"),
        TIDINGS_SMTP_URL=smtp_url,
    )
    command = [tidings_script(), "worker", "--once"]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_the_worker_warns_once_at_start_when_the_relay_does_not_answer(
    tmp_path: Path, smtp_sink: SmtpSink
) -> None:
    port = free_port()  # nothing listens there
    result = worker_once(tmp_path, f"smtp://user:secret@127.0.0.1:{port}?starttls=1")
    assert result.returncode == 0, result.stderr
    [warning] = relay_warnings(result.stderr)
    assert (
        f"the SMTP relay 127.0.0.1:{port} (TIDINGS_SMTP_URL) does not answer: Connection refused" in warning
    )
    assert "secret" not in result.stderr
    # A relay that answers: nothing to warn about.
    answered = worker_once(tmp_path, smtp_sink.url)
    assert answered.returncode == 0, answered.stderr
    assert relay_warnings(answered.stderr) == []


def test_serve_warns_once_at_start_when_the_relay_does_not_answer(database_url: str, tmp_path: Path) -> None:
    port = free_port()
    # HTTP only: a scheduler would take the test database's queues.
    with shipped_serve(
        database_url, tmp_path / "var", "--no-scheduler", TIDINGS_SMTP_URL=f"smtp://127.0.0.1:{port}"
    ) as served:
        [warning] = relay_warnings(served.output())
    assert f"127.0.0.1:{port} (TIDINGS_SMTP_URL) does not answer: Connection refused" in warning
