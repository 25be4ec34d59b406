"""Every setting is checked before anything starts: a bad one, in `tidings serve`, `tidings worker` or
any other command, exits 1 with one line on stderr, `error: TIDINGS_X='value': what is wrong, what is
allowed`, never a traceback. The table of docs/operations.md is walked: each setting it lists has a bad
value here (or is free text, and says why), refused alone in-process and all at once through the
installed console script."""

from __future__ import annotations

import logging.config
import os
import socket
import subprocess
from pathlib import Path

import pytest

from app.config import SettingsError, load_settings
from tests.cli_runner import Tidings, tidings_fixture  # noqa: F401
from tests.processes import command_environment, free_port, tidings_script
from tests.test_settings_table import documented_settings

BAD_VALUES = {
    "TIDINGS_ENV": "prod",
    "TIDINGS_DATABASE_URL": "mysql://db.example.org/tidings",
    "TIDINGS_BASE_URL": "mail.example.org",
    "TIDINGS_VAR_DIR": "<a file>",  # made by the test
    "TIDINGS_REDIS_URL": "127.0.0.1:6379",
    "TIDINGS_LOG_FORMAT": "jsno",
    "TIDINGS_SCHEDULER": "yesplease",
    "TIDINGS_MAIL_RATE_LIMIT": "60 per min",
    "TIDINGS_SMTP_URL": "smtp//oops",
    "TIDINGS_SEND_RATE": "-1",
    "TIDINGS_DAILY_SEND_LIMIT": "-5",
    "TIDINGS_SEND_BATCH_SIZE": "0",
    "TIDINGS_SEND_CONCURRENCY": "0",
    "TIDINGS_SEND_LEASE_SECONDS": "five minutes",
    "TIDINGS_SEND_LANES": "0",
    "TIDINGS_BOUNCE_STOP_RATE": "10%",
    "TIDINGS_BOUNCE_STOP_MIN_SENT": "0",
    "TIDINGS_COMPLAINT_STOP_RATE": "2",
    "TIDINGS_COMPLAINT_STOP_MIN_SENT": "many",
    "TIDINGS_BLOCKED_STOP_RATE": "10%",
    "TIDINGS_BLOCKED_STOP_MIN": "0",
    "TIDINGS_RELAY_SIGNS": "perhaps",
    "TIDINGS_SMTP_HELO_NAME": "not a host",
    "TIDINGS_SMTP_THROTTLE_WINDOW": "0",
    "TIDINGS_DKIM_UNSIGNED_HEADERS": "date,from",
    "TIDINGS_BOUNCE_WEBHOOK_SECRET": "pasted secret\n",
    "TIDINGS_BOUNCE_DOMAIN": "not a domain",
    "TIDINGS_BOUNCE_IMAP_URL": "http://mail.example.org",
    "TIDINGS_BOUNCE_IMAP_INTERVAL": "0",
    "TIDINGS_SES_TOPIC_ARNS": "my-topic",
    "TIDINGS_SES_SNS_URL_PREFIX": "sns.example.org",
    "TIDINGS_POSTMARK_WEBHOOK_SECRET": "two words",
    "TIDINGS_SENDGRID_WEBHOOK_PUBLIC_KEY": "not-a-key",
    "TIDINGS_MAILGUN_WEBHOOK_SIGNING_KEY": "key\twith a tab",
    "TIDINGS_FORM_RATE_LIMIT": "ten a minute",
    "TIDINGS_FORM_EMAIL_RATE_LIMIT": "5/fortnight",
    "TIDINGS_PUBLIC_PAGE_RATE_LIMIT": "sixty a minute",
    "TIDINGS_AUTH_SIGNUP_ENABLED": "maybe",
    "TIDINGS_AUTH_USERNAME_CHANGE": "sometimes",
    "TIDINGS_SIGNUP_PLAN": "gold",
    "TIDINGS_OUTBOUND_ALLOW_PRIVATE": "perhaps",
    "TIDINGS_HN_API_URL": "hn.algolia.com/api/v1",
    "TIDINGS_REDDIT_URL": "ftp://www.reddit.com",
    "TIDINGS_FEED_MIN_POLL_SECONDS": "-1",
    "TIDINGS_FEED_POLL_CONCURRENCY": "0",
    "TIDINGS_FEED_POLL_PER_HOST": "0",
    "TIDINGS_FEED_FETCH_TIMEOUT": "0",
    "TIDINGS_FEED_FETCH_MAX_BYTES": "5MB",
    "TIDINGS_FEED_LEASE_SECONDS": "0",
    "TIDINGS_TELEMETRY_URL": "telemetry",
    "TIDINGS_ENGINE_BASE_URL": "http://127.0.0.1:99999/v1",
    "TIDINGS_ENGINE_API_KEY": "sk 1",
    "TIDINGS_ENGINE_TIMEOUT": "0",
    "TIDINGS_ENGINE_RETRIES": "-1",
    "TIDINGS_ENRICHMENT_TIMEOUT": "-1",
    "TIDINGS_ENRICHMENT_MAX_BYTES": "0",
    "TIDINGS_WATCH_DRAIN_BATCH": "0",
    "TIDINGS_WATCH_DRAIN_CONCURRENCY": "0",
    "TIDINGS_WATCH_RUN_LEASE_SECONDS": "0",
    "TIDINGS_WEBHOOK_TIMEOUT": "0",
    "TIDINGS_WEBHOOK_MAX_RESPONSE_BYTES": "0",
    "TIDINGS_EVENT_BATCH_SIZE": "0",
    "TIDINGS_EVENT_CONCURRENCY": "0",
    "TIDINGS_DIGEST_MAX_ITEMS": "0",
    "TIDINGS_METRICS_ALLOWED_NETWORKS": "10.0.0.0/33",
    "TIDINGS_METRICS_TOKEN": "token with spaces",
}
# Settings every value of which is allowed, with why.
FREE_TEXT = {
    "TIDINGS_ENGINE_MODEL": "a model name, whatever the engine calls its models",
    "TIDINGS_LOCAL_ENGINE_MODEL": "a package name or a path, loaded when the local engine is first used",
}
# Refused by the production check (test_production_refuses_a_weak_key_and_an_http_base_url in
# tests/test_cli.py): any key is allowed outside production.
PRODUCTION_ONLY = {"TIDINGS_SECRET_KEY"}
SECRETS = {"TIDINGS_BOUNCE_WEBHOOK_SECRET", "TIDINGS_POSTMARK_WEBHOOK_SECRET"}


def bad_values(tmp_path: Path) -> dict[str, str]:
    a_file = tmp_path / "not-a-directory"
    a_file.write_text("")
    return {**BAD_VALUES, "TIDINGS_VAR_DIR": str(a_file)}


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # In a directory of its own, so no ./.env of the repository is read.
    return subprocess.run(
        [tidings_script(), *args],
        cwd=tmp_path,
        env=command_environment(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_every_documented_setting_has_a_bad_value_here() -> None:
    walked = set(BAD_VALUES) | set(FREE_TEXT) | PRODUCTION_ONLY
    assert walked == set(documented_settings())


def test_each_bad_value_alone_is_refused_naming_its_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    for name in [key for key in os.environ if key.startswith("TIDINGS_")]:
        monkeypatch.delenv(name)
    for name, value in bad_values(tmp_path).items():
        with monkeypatch.context() as env:
            env.setenv(name, value)
            with pytest.raises(SettingsError) as refused:
                load_settings()
        message = str(refused.value)
        assert message.startswith(f"{name}="), message
        assert "\n" not in message and "Value error" not in message and "Input should" not in message
        if name in SECRETS:
            assert value.strip() not in message


def test_all_bad_settings_at_once_give_one_line_through_the_console_script(tmp_path: Path) -> None:
    line = one_error_line(run(tmp_path, "users", "list", **bad_values(tmp_path)))
    for name in BAD_VALUES:
        assert f"{name}=" in line, name


@pytest.mark.parametrize(
    ("command", "setting", "value", "says"),
    [
        (["serve"], "TIDINGS_SMTP_URL", "smtp//oops", "not an smtp:// or smtps:// URL; write it as smtp://"),
        (["worker"], "TIDINGS_ENV", "prod", "must be 'development', 'production' or 'test'"),
        (["serve", "--no-scheduler"], "TIDINGS_SCHEDULER", "yesplease", "not a boolean; write true or false"),
        (["tokens", "list"], "TIDINGS_MAIL_RATE_LIMIT", "60 per min", "not a rate; write it as 60/minute"),
    ],
)
def test_the_operators_four_mistakes_each_get_their_line(
    tmp_path: Path, command: list[str], setting: str, value: str, says: str
) -> None:
    line = one_error_line(run(tmp_path, *command, **{setting: value}))
    assert line == f"error: {setting}={value!r}: {says}" or line.startswith(
        f"error: {setting}={value!r}: {says}"
    )
    assert not (tmp_path / "var").exists()  # refused before anything was made


def test_postgres_urls_as_hosting_providers_give_them_are_postgresql(monkeypatch: pytest.MonkeyPatch) -> None:
    for given in (
        "postgres://u:p@db.example.org:5432/tidings",
        "postgresql://u:p@db.example.org:5432/tidings",
    ):
        monkeypatch.setenv("TIDINGS_DATABASE_URL", given)
        assert load_settings().database_url == "postgresql+psycopg://u:p@db.example.org:5432/tidings"


def test_a_port_out_of_range_or_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    line = one_error_line(run(tmp_path, "serve", "--port", "99999"))
    assert line == "error: --port 99999 is not a port: give a number from 1 to 65535"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_error_line(run(tmp_path, "serve", "--port", str(port)))
        assert line.startswith(f"error: cannot listen on 127.0.0.1:{port} (--port): Address already in use")
        line = one_error_line(run(tmp_path, "worker", "--metrics-port", str(port)))
        assert line.startswith(f"error: cannot listen on 127.0.0.1:{port} (--metrics-port)")
    assert not (tmp_path / "var").exists()  # no database was made, no job started


def test_the_worker_health_check_timeout_reaches_uvicorns_supervisor(
    tidings: Tidings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn's own 5 s replaced busy HTTP workers of a loaded machine ten times in 70 s: the timeout
    is the operator's, 30 s unless they say."""
    from app import http_supervisor

    started: list[tuple[int, int]] = []
    monkeypatch.setattr(
        http_supervisor,
        "run_supervised",
        lambda config: started.append((config.workers, config.timeout_worker_healthcheck)),
    )
    # serve sets the process's logging up for uvicorn; this test process keeps its own (a handler on the
    # runner's stderr, closed after the call, would break every later test's log lines).
    monkeypatch.setattr(logging.config, "dictConfig", lambda config: None)
    port = str(free_port())
    assert tidings("serve", "--port", port, "--workers", "2").exit_code == 0
    assert tidings("serve", "--port", port, "--workers", "2", "--worker-timeout", "90").exit_code == 0
    assert started == [(2, 30), (2, 90)]
    assert tidings.fails("serve", "--port", port, "--worker-timeout", "0") == (
        "error: --worker-timeout 0: give 1 or more seconds"
    )
