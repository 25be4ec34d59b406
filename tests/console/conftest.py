"""Fixtures of the console's tests: a person signed in with the session cookie, as a browser is, on an
app over the test's transaction (the browser tests run a real server instead: test_browser.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from tests.authroutes.conftest import SAME_ORIGIN, Person, make_client, make_person, sign_in

__all__ = ["SAME_ORIGIN", "make_client", "make_person"]


@pytest.fixture
def person(make_person: Callable[..., Person]) -> Person:
    return make_person("console_user")


@pytest.fixture
def console(make_client: Callable[..., TestClient], person: Person) -> TestClient:
    """A TestClient signed in as `person`, sending this service's Origin on its writes as a browser does."""
    client = make_client(outbound_allow_private=True)
    sign_in(client, person)
    client.headers.update(SAME_ORIGIN)
    return client
