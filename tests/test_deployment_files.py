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
    assert f"127.0.0.1:{port}:{port}" in SERVICES["app"]["ports"]
    assert f"EXPOSE {port}" in DOCKERFILE
    assert f"127.0.0.1:{port}/healthz" in DOCKERFILE
    assert "127.0.0.1:8025:8025" in SERVICES["mailpit"]["ports"]  # the web inbox docs/operations.md names


def test_image_runs_as_a_non_root_user_in_two_stages() -> None:
    assert DOCKERFILE.count("\nFROM ") + DOCKERFILE.startswith("FROM ") >= 2
    user = re.search(r"^USER (\S+)$", DOCKERFILE, re.MULTILINE)
    assert user is not None and user.group(1) not in ("root", "0")
    assert "HEALTHCHECK" in DOCKERFILE


def test_every_port_is_published_on_loopback_only() -> None:
    # `8000:8000` would publish the demo, its published password and the placeholder secret's
    # signatures on every interface of the host.
    for name, service in SERVICES.items():
        for mapping in service.get("ports", []):
            assert str(mapping).startswith("127.0.0.1:"), f"{name} publishes {mapping} beyond loopback"


def test_the_demo_starts_with_an_account_outside_production_only() -> None:
    command = SERVICES["app"]["command"]
    assert "--demo" in command  # a usable API on the first `up`: its token is in the app's log
    environment = SERVICES["app"]["environment"]
    assert default_of(environment["TIDINGS_ENV"]) == "development"
    # The same files under TIDINGS_ENV=production: the shipped secret is refused, and so is --demo.
    production = Settings(
        env="production",
        secret_key=default_of(environment["TIDINGS_SECRET_KEY"]),
        base_url="https://mail.example.org",
    )
    [problem] = production.production_problems()
    assert problem.startswith("TIDINGS_SECRET_KEY is the placeholder of the shipped files")
    own_key = Settings(env="production", secret_key="k" * 48, base_url="https://mail.example.org")
    assert own_key.production_problems() == []


def test_the_app_waits_for_what_it_uses_and_every_service_restarts() -> None:
    app_needs = SERVICES["app"]["depends_on"]
    assert app_needs["postgres"]["condition"] == "service_healthy"
    assert "mailpit" in app_needs  # hosted forms' confirmation emails go out from the app
    assert "redis" in app_needs
    for name, service in SERVICES.items():
        assert service.get("restart") == "unless-stopped", f"{name} is not restarted"
    # Migrating an empty database takes a while: failed checks before start_period do not count.
    for name in ("app", "postgres"):
        start_period = SERVICES[name]["healthcheck"]["start_period"]
        assert re.fullmatch(r"\d+s", start_period) and int(start_period[:-1]) >= 10, name
    assert "/healthz" in " ".join(SERVICES["app"]["healthcheck"]["test"])


def test_every_image_is_pinned_to_a_version() -> None:
    images = [service["image"] for service in SERVICES.values() if "image" in service]
    images += re.findall(r"^FROM (\S+)", DOCKERFILE, re.MULTILINE)
    assert images
    for image in images:
        name, _, tag = image.rpartition(":")
        # A release with at least a minor version: `latest`, `16` or no tag move under the file.
        assert name and re.fullmatch(r"v?\d+\.\d+(\.\d+)?(-[a-z0-9.]+)?", tag), f"{image} is not pinned"
