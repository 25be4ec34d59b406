"""The installed release of Tidings, as `tidings --version` and /healthz report it."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def installed_version() -> str:
    try:
        return version("tidings")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"
