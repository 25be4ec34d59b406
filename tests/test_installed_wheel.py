"""`pip install .` as an operator does it, not the editable install of development: the wheel is built
from a copy of what the Dockerfile copies, installed into a fresh virtualenv, and run from a directory
that holds nothing of the source tree. Migrations and OpenAPI documents must come from the package.

The fresh virtualenv borrows the test environment's dependencies (a .pth file naming its site-packages,
whose own .pth files, the editable install's among them, are not read from there): only the wheel is
installed, with --no-deps, so the test needs no index beyond the build backend pip may take from its
cache."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.kit.release import installed_version
from tests.processes import command_environment, free_port, served_command

ROOT = Path(__file__).resolve().parent.parent
# What the Dockerfile's build stage copies: all a wheel is built from.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "app", "migrations", "openapi")


@dataclass
class Installed:
    bin: Path
    site_packages: Path


def check(command: list[str], cwd: Path, **env: str) -> str:
    result = subprocess.run(
        command, cwd=cwd, env=command_environment(**env), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{command}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    check([*pip, "wheel", "--no-deps", "--wheel-dir", str(work / "dist"), str(source)], work)
    [wheel] = (work / "dist").glob("tidings-*.whl")

    venv = work / "venv"
    check([sys.executable, "-m", "venv", "--without-pip", str(venv)], work)
    python = venv / "bin" / "python"
    purelib = Path(check([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], work))
    site_packages = Path(str(purelib).strip())
    (site_packages / "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    check([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], work)
    return Installed(venv / "bin", site_packages)


def test_the_installed_package_migrates_and_serves_from_any_directory(
    installed: Installed, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    var = tmp_path / "var"
    tidings = str(installed.bin / "tidings")

    where = check([str(installed.bin / "python"), "-c", "import app; print(app.__file__)"], elsewhere)
    assert Path(where.strip()).is_relative_to(installed.site_packages), where

    assert check([tidings, "db", "upgrade"], elsewhere, TIDINGS_VAR_DIR=str(var)) == "database is at head\n"
    assert (var / "tidings.db").is_file()
    assert check([tidings, "db", "current"], elsewhere, TIDINGS_VAR_DIR=str(var)).strip() not in (
        "",
        "(empty database)",
    )

    port = free_port()
    env = command_environment(TIDINGS_VAR_DIR=str(var))
    command = [tidings, "serve", "--no-scheduler", "--port", str(port)]
    with served_command(command, port, elsewhere, env, tmp_path / "logs") as served:
        health = httpx.get(f"{served.base}/healthz", timeout=10)
        # The wheel's own version, as openmagpie's `magpie version` reads it.
        assert health.json() == {"status": "ok", "database": "ok", "version": installed_version()}
        document = httpx.get(f"{served.base}/openapi.yaml", timeout=30)
        assert document.status_code == 200
        # The committed document ships in the package, equal to what the installed code serves.
        shipped = installed.site_packages / "app" / "_openapi" / "mail.yaml"
        assert document.text == shipped.read_text()
        assert httpx.get(f"{served.base}/docs", timeout=10).status_code == 200
    assert not (elsewhere / "var").exists()
    # Every page template ships, the console's sections a folder deeper than the rest included.
    templates = Path(__file__).resolve().parent.parent / "app" / "templates"
    shipped_templates = installed.site_packages / "app" / "templates"
    missing = [
        str(path.relative_to(templates))
        for path in templates.rglob("*")
        if path.is_file() and not (shipped_templates / path.relative_to(templates)).is_file()
    ]
    assert missing == []
