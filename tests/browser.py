"""The `browser` fixture: a headless Chromium (Debian's `chromium`, driven by Playwright; no browser is
downloaded). Skipped on a developer's machine without it, a failure in CI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def browser() -> Iterator[Any]:
    # Imported here, not at the top: every test session loads this module (tests/conftest.py's
    # pytest_plugins), and tests.authroutes.live imports the app's database and identity modules.
    from tests.authroutes.live import require

    require(CHROMIUM.exists(), "the Debian package chromium is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover - a developer's machine without the test extras
        require(False, "playwright is not installed (pip install -e '.[test]')")
        raise
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()
