"""The pieces under the auth routes: the signed session cookie value, origins and trusted URLs, and the
username rules (ASCII only, whole string)."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.identity.accounts import UsernameProblem, username_problem
from app.identity.origin_guard import is_trusted_url, origin_of
from app.identity.session_cookie import signed_value, token_of

SECRET = "s" * 40


def test_a_signed_value_gives_back_its_token_and_nothing_else_does() -> None:
    value = signed_value("tok.en-with.dots", SECRET)
    assert token_of(value, SECRET) == "tok.en-with.dots"
    assert token_of(value, "another secret " * 3) is None
    assert token_of(value + "x", SECRET) is None
    for forged in ("", ".", "token", ".sig", "tok.en-with.dots.", "x" * 10_000):
        assert token_of(forged, SECRET) is None


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://127.0.0.1:8000/x?y", "http://127.0.0.1:8000"),
        ("HTTPS://Example.COM:443/", "https://example.com"),
        ("http://example.com:80", "http://example.com"),
        ("http://[::1]:8000/", "http://[::1]:8000"),
        ("ftp://example.com", None),
        ("null", None),
        ("http://", None),
        ("http://example.com:99999", None),
        ("/relative", None),
    ],
)
def test_origin_of(url: str, origin: str | None) -> None:
    assert origin_of(url) == origin


def test_trusted_urls_are_this_services_origin_or_its_paths() -> None:
    settings = Settings(base_url="https://tidings.example", secret_key=SECRET)
    assert is_trusted_url("https://tidings.example/account", settings, allow_relative=False)
    assert is_trusted_url("/account/tokens", settings, allow_relative=True)
    assert not is_trusted_url("/account/tokens", settings, allow_relative=False)
    for url in (
        "//evil.example",
        "/\\evil.example",
        "https://tidings.example.evil.example/",
        "http://tidings.example/",
    ):
        assert not is_trusted_url(url, settings, allow_relative=True), url


@pytest.mark.parametrize(
    ("username", "problem"),
    [
        ("abc", None),
        ("a.b_C9", None),
        ("a" * 30, None),
        ("ab", UsernameProblem.TOO_SHORT),
        ("a" * 31, UsernameProblem.TOO_LONG),
        ("abc\n", UsernameProblem.INVALID),
        ("ab\u0441", UsernameProblem.INVALID),  # Cyrillic small es
        ("abc def", UsernameProblem.INVALID),
    ],
)
def test_username_rules(username: str, problem: UsernameProblem | None) -> None:
    assert username_problem(username) == problem
