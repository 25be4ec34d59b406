"""The SSRF-safe client against a real server on loopback: what it refuses (loopback, private ranges,
link-local metadata, IPv4-mapped IPv6, names that resolve inward), that it connects to the address it
checked, never follows redirects, and caps bodies (gzip bombs included) and time."""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from app.kit.safe_http import (
    BlockedDestination,
    ConnectFailed,
    InvalidUrl,
    OutboundTimeout,
    ResponseTooLarge,
    SafeHttp,
    is_public_address,
    literal_host_problem,
)
from tests.upstream import Upstream, big_body, endless, gzip_bomb, respond, slow


def run(coro_factory: Callable[[SafeHttp], Awaitable[Any]], **options: Any) -> Any:
    async def main() -> Any:
        async with SafeHttp(**options) as http:
            return await coro_factory(http)

    return asyncio.run(main())


def fixed_resolver(answers: dict[str, list[str]]) -> Callable[[str, int], Awaitable[list[str]]]:
    async def resolve(host: str, port: int) -> list[str]:
        return answers[host]

    return resolve


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("127.255.0.9", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("172.31.255.254", False),
        ("192.168.0.10", False),
        ("169.254.169.254", False),  # cloud metadata
        ("100.64.0.1", False),  # shared address space (carrier-grade NAT)
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("240.0.0.1", False),
        ("255.255.255.255", False),
        ("::1", False),
        ("::", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("fd00:ec2::254", False),  # AWS metadata over IPv6
        ("::ffff:127.0.0.1", False),  # IPv4-mapped
        ("::ffff:169.254.169.254", False),
        ("::ffff:10.0.0.1", False),
        ("::ffff:93.184.216.34", True),
        ("::127.0.0.1", False),  # IPv4-compatible
        ("2002:7f00:1::1", False),  # 6to4 wrapping 127.0.0.1
        ("2002:a9fe:a9fe::1", False),  # 6to4 wrapping 169.254.169.254
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254
        ("64:ff9b::5db8:d822", True),  # NAT64 of a public address
        ("2001:db8::1", False),  # documentation
    ],
)
def test_which_addresses_are_public(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/feed",
        "http://localhost/feed",
        "http://LOCALHOST./feed",
        "http://api.localhost/feed",
        "http://10.0.0.5/feed",
        "http://172.20.1.1:8080/feed",
        "http://192.168.1.1/feed",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/feed",
        "http://[::ffff:127.0.0.1]/feed",
        "http://[::ffff:a9fe:a9fe]/feed",
        "http://0.0.0.0/feed",
    ],
)
def test_literal_non_public_destinations_are_refused_before_any_connection(url: str) -> None:
    assert literal_host_problem(url, allow_private=False) is not None
    with pytest.raises(BlockedDestination):
        run(lambda http: http.get(url))
    assert literal_host_problem(url, allow_private=True) is None


def test_the_loopback_server_itself_is_refused_unless_private_addresses_are_allowed(
    upstream: Upstream,
) -> None:
    upstream.serve("/feed", "<rss/>")
    with pytest.raises(BlockedDestination):
        run(lambda http: http.get(upstream.url("/feed")))
    assert upstream.seen == []
    response = run(lambda http: http.get(upstream.url("/feed")), allow_private=True)
    assert response.status_code == 200
    assert response.content == b"<rss/>"


def test_a_name_that_resolves_to_loopback_is_refused(upstream: Upstream) -> None:
    upstream.serve("/feed", "<rss/>")
    url = f"http://feeds.example.test:{upstream.port}/feed"
    for answers in (["127.0.0.1"], ["::1"], ["93.184.216.34", "127.0.0.1"], ["::ffff:127.0.0.1"]):
        resolver = fixed_resolver({"feeds.example.test": answers})
        with pytest.raises(BlockedDestination, match="non-public"):
            run(lambda http: http.get(url), resolver=resolver)
    assert upstream.seen == []
    with pytest.raises(BlockedDestination):
        resolver = fixed_resolver({"metadata.example.test": ["169.254.169.254"]})
        run(lambda http: http.get("http://metadata.example.test/latest/"), resolver=resolver)


def test_it_connects_to_the_address_it_checked_and_keeps_the_host_name(upstream: Upstream) -> None:
    """The name is resolved once, by the client: the connection goes to that answer (no second
    lookup a rebinding DNS server could answer differently), and the request still names the host."""
    upstream.serve("/feed", "<rss/>")
    calls: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"]

    url = f"http://feeds.example.test:{upstream.port}/feed"
    response = run(lambda http: http.get(url), resolver=resolver, allow_private=True)
    assert response.status_code == 200
    assert calls == ["feeds.example.test"]
    assert upstream.seen[0].headers["host"] == f"feeds.example.test:{upstream.port}"


def test_redirects_are_returned_not_followed(upstream: Upstream) -> None:
    upstream.serve("/moved", "", 302, Location=upstream.url("/target"))
    upstream.serve("/target", "<rss/>")
    response = run(lambda http: http.get(upstream.url("/moved")), allow_private=True)
    assert response.status_code == 302
    assert response.is_redirect
    assert upstream.requests_to("/target") == []
    # A redirect to the metadata address is just as inert.
    upstream.serve("/sneaky", "", 301, Location="http://169.254.169.254/latest/meta-data/")
    assert run(lambda http: http.get(upstream.url("/sneaky")), allow_private=True).status_code == 301


@pytest.mark.parametrize("declare_length", [True, False])
def test_a_body_over_the_cap_is_refused(upstream: Upstream, declare_length: bool) -> None:
    upstream.route("/big", big_body(50 * 1024 * 1024, declare_length=declare_length))
    started = time.monotonic()
    with pytest.raises(ResponseTooLarge):
        run(lambda http: http.get(upstream.url("/big")), allow_private=True, max_bytes=1024 * 1024)
    assert time.monotonic() - started < 5


def test_a_gzip_bomb_stops_at_the_cap_after_decoding(upstream: Upstream) -> None:
    upstream.route("/bomb", gzip_bomb(64 * 1024 * 1024))
    with pytest.raises(ResponseTooLarge):
        run(lambda http: http.get(upstream.url("/bomb")), allow_private=True, max_bytes=1024 * 1024)


def test_a_never_ending_response_and_a_slow_host_hit_the_deadline(upstream: Upstream) -> None:
    upstream.route("/endless", endless())
    upstream.route("/slow", slow(5, respond("<rss/>")))
    for path in ("/endless", "/slow"):
        started = time.monotonic()
        with pytest.raises(OutboundTimeout):
            run(lambda http, p=path: http.get(upstream.url(p)), allow_private=True, timeout=0.5)  # type: ignore[misc]
        assert time.monotonic() - started < 3, path


def test_bad_urls_and_unreachable_hosts_are_errors_not_crashes() -> None:
    for url in ("ftp://example.com/feed", "not a url", "http:///nohost"):
        with pytest.raises(InvalidUrl):
            run(lambda http, u=url: http.get(u))  # type: ignore[misc]
    # A port nobody listens on: refused at once.
    with pytest.raises(ConnectFailed):
        run(lambda http: http.get("http://127.0.0.1:9/"), allow_private=True, timeout=5)
