"""Fixtures for /v1/auth: the people, apps and browser sign-in of the /api/auth tests."""

from __future__ import annotations

from tests.authroutes.conftest import auth_client, make_client, make_person, member  # noqa: F401
