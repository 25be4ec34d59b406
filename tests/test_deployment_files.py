"""No Docker engine runs here, so the container files are checked against the app instead: every
TIDINGS_ variable they set is a real setting, the commands exist, and ports and addresses agree."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from typer.testing import CliRunner

from app.cli import cli
from app.config import Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()
SERVICES: dict[str, Any] = COMPOSE["services"]


def default_of(value: str) -> str:
    """`${NAME:-default}` -> default (what compose uses when the variable is unset)."""
    match = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
    return match.group(1) if match else value


def test_every_tidings_variable_is_a_setting() -> None:
    fields = {f"TIDINGS_{name.upper()}" for name in Settings.model_fields}
    for name in ("app", "worker"):
        environment = SERVICES[name]["environment"]
        unknown = {key for key in environment if key.startswith("TIDINGS_")} - fields
        assert not unknown, f"{name} sets variables the app does not read: {unknown}"
        settings = Settings(
            **{key[len("TIDINGS_") :].lower(): default_of(v) for key, v in environment.items()}
        )
        assert urlsplit(settings.database_url).hostname == "postgres"
        assert urlsplit(settings.redis_url).hostname == "redis"
        smtp = urlsplit(settings.smtp_url)
        assert (smtp.hostname, smtp.port) == ("mailpit", 1025)  # Mailpit's SMTP port


def test_commands_are_real_and_ports_agree() -> None:
    runner = CliRunner()
    for name in ("app", "worker"):
        command = SERVICES[name]["command"]
        assert command[0] == "tidings"
        help_text = runner.invoke(cli, [*command[1:2], "--help"])
        assert help_text.exit_code == 0, help_text.output
        for option in (part for part in command[2:] if part.startswith("--")):
            assert option in help_text.output, f"{option} is not an option of tidings {command[1]}"
    app_command = SERVICES["app"]["command"]
    port = app_command[app_command.index("--port") + 1]
    assert f"{port}:{port}" in SERVICES["app"]["ports"]
    assert f"EXPOSE {port}" in DOCKERFILE
    assert f"127.0.0.1:{port}/healthz" in DOCKERFILE
    assert "8025:8025" in SERVICES["mailpit"]["ports"]  # the web inbox docs/operations.md points to


def test_image_runs_as_a_non_root_user_in_two_stages() -> None:
    assert DOCKERFILE.count("\nFROM ") + DOCKERFILE.startswith("FROM ") >= 2
    user = re.search(r"^USER (\S+)$", DOCKERFILE, re.MULTILINE)
    assert user is not None and user.group(1) not in ("root", "0")
    assert "HEALTHCHECK" in DOCKERFILE
