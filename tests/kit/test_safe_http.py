"""The SSRF-safe client against a real server on loopback, on each event loop the service runs on: what
it refuses (loopback, private ranges, link-local metadata, IPv4-mapped IPv6, names that resolve inward),
that it connects to the address it checked, never follows redirects, caps bodies (gzip bombs included)
and time, and keeps connections alive without reusing one the server closed."""

from __future__ import annotations

import asyncio
import ipaddress
import json
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
from tests.loops import LOOPS, Run
from tests.upstream import Upstream, big_body, endless, gzip_bomb, respond, slow

Fetch = Callable[..., Any]


@pytest.fixture
def fetch(run: Run[Any]) -> Fetch:
    """Calls `coro_factory(http)` with a new SafeHttp(**options), on each event loop the service runs on."""

    def fetch(coro_factory: Callable[[SafeHttp], Awaitable[Any]], **options: Any) -> Any:
        async def main() -> Any:
            async with SafeHttp(**options) as http:
                return await coro_factory(http)

        return run(main())

    return fetch


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
def test_literal_non_public_destinations_are_refused_before_any_connection(url: str, fetch: Fetch) -> None:
    assert literal_host_problem(url, allow_private=False) is not None
    with pytest.raises(BlockedDestination):
        fetch(lambda http: http.get(url))
    assert literal_host_problem(url, allow_private=True) is None


def test_the_loopback_server_itself_is_refused_unless_private_addresses_are_allowed(
    upstream: Upstream, fetch: Fetch
) -> None:
    upstream.serve("/feed", "<rss/>")
    with pytest.raises(BlockedDestination):
        fetch(lambda http: http.get(upstream.url("/feed")))
    assert upstream.seen == []
    response = fetch(lambda http: http.get(upstream.url("/feed")), allow_private=True)
    assert response.status_code == 200
    assert response.content == b"<rss/>"


def test_a_name_that_resolves_to_loopback_is_refused(upstream: Upstream, fetch: Fetch) -> None:
    upstream.serve("/feed", "<rss/>")
    url = f"http://feeds.example.test:{upstream.port}/feed"
    for answers in (["127.0.0.1"], ["::1"], ["93.184.216.34", "127.0.0.1"], ["::ffff:127.0.0.1"]):
        resolver = fixed_resolver({"feeds.example.test": answers})
        with pytest.raises(BlockedDestination, match=r"non-public.*TIDINGS_OUTBOUND_ALLOW_PRIVATE=true"):
            fetch(lambda http: http.get(url), resolver=resolver)
    assert upstream.seen == []
    with pytest.raises(BlockedDestination):
        resolver = fixed_resolver({"metadata.example.test": ["169.254.169.254"]})
        fetch(lambda http: http.get("http://metadata.example.test/latest/"), resolver=resolver)


def test_it_connects_to_the_address_it_checked_and_keeps_the_host_name(
    upstream: Upstream, fetch: Fetch
) -> None:
    """The name is resolved once, by the client: the connection goes to that answer (no second
    lookup a rebinding DNS server could answer differently), and the request still names the host."""
    upstream.serve("/feed", "<rss/>")
    calls: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["127.0.0.1"]

    url = f"http://feeds.example.test:{upstream.port}/feed"
    response = fetch(lambda http: http.get(url), resolver=resolver, allow_private=True)
    assert response.status_code == 200
    assert calls == ["feeds.example.test"]
    assert upstream.seen[0].headers["host"] == f"feeds.example.test:{upstream.port}"


def test_redirects_are_returned_not_followed(upstream: Upstream, fetch: Fetch) -> None:
    upstream.serve("/moved", "", 302, Location=upstream.url("/target"))
    upstream.serve("/target", "<rss/>")
    response = fetch(lambda http: http.get(upstream.url("/moved")), allow_private=True)
    assert response.status_code == 302
    assert response.is_redirect
    assert upstream.requests_to("/target") == []
    # A redirect to the metadata address is just as inert.
    upstream.serve("/sneaky", "", 301, Location="http://169.254.169.254/latest/meta-data/")
    assert fetch(lambda http: http.get(upstream.url("/sneaky")), allow_private=True).status_code == 301


@pytest.mark.parametrize("declare_length", [True, False])
def test_a_body_over_the_cap_is_refused(upstream: Upstream, declare_length: bool, fetch: Fetch) -> None:
    upstream.route("/big", big_body(50 * 1024 * 1024, declare_length=declare_length))
    started = time.monotonic()
    with pytest.raises(ResponseTooLarge):
        fetch(lambda http: http.get(upstream.url("/big")), allow_private=True, max_bytes=1024 * 1024)
    assert time.monotonic() - started < 5


def test_a_gzip_bomb_stops_at_the_cap_after_decoding(upstream: Upstream, fetch: Fetch) -> None:
    upstream.route("/bomb", gzip_bomb(64 * 1024 * 1024))
    with pytest.raises(ResponseTooLarge):
        fetch(lambda http: http.get(upstream.url("/bomb")), allow_private=True, max_bytes=1024 * 1024)


def test_a_never_ending_response_and_a_slow_host_hit_the_deadline(upstream: Upstream, fetch: Fetch) -> None:
    upstream.route("/endless", endless())
    upstream.route("/slow", slow(5, respond("<rss/>")))
    for path in ("/endless", "/slow"):
        started = time.monotonic()
        with pytest.raises(OutboundTimeout):
            fetch(lambda http, p=path: http.get(upstream.url(p)), allow_private=True, timeout=0.5)
        assert time.monotonic() - started < 3, path


def test_bad_urls_and_unreachable_hosts_are_errors_not_crashes(fetch: Fetch) -> None:
    for url in ("ftp://example.com/feed", "not a url", "http:///nohost"):
        with pytest.raises(InvalidUrl):
            fetch(lambda http, u=url: http.get(u))
    # A port nobody listens on: refused at once.
    with pytest.raises(ConnectFailed):
        fetch(lambda http: http.get("http://127.0.0.1:9/"), allow_private=True, timeout=5)


def test_a_legacy_numeric_host_and_a_header_with_a_line_break_are_refused(
    upstream: Upstream, fetch: Fetch
) -> None:
    """`http://2130706433/` is 127.0.0.1 to the operating system's resolver; a line break in a header
    value would smuggle a header of the caller's choosing. Neither is sent."""
    upstream.serve("/hook", "")
    for url in ("http://2130706433/", "http://0x7f000001/", "http://127.1/"):
        with pytest.raises((InvalidUrl, BlockedDestination)):
            fetch(lambda http, u=url: http.get(u))
    with pytest.raises(ConnectFailed):
        fetch(
            lambda http: http.get(upstream.url("/hook"), headers={"X-Note": "a\r\nX-Injected: 1"}),
            allow_private=True,
        )
    assert upstream.seen == []


def test_one_client_serves_one_event_loop_after_another(upstream: Upstream) -> None:
    """A client made outside any loop (as the jobs make theirs) is used by successive `asyncio.run`s, as
    the tests and `tidings worker --once` do: each loop gets its own connections."""
    upstream.serve("/feed", "<rss/>")
    http = SafeHttp(allow_private=True)
    for factory, _ in (LOOPS["asyncio"], LOOPS["uvloop"], LOOPS["asyncio"]):
        with asyncio.Runner(loop_factory=factory) as runner:
            assert runner.run(http.get(upstream.url("/feed"))).content == b"<rss/>"
    asyncio.run(http.aclose())
    assert len(upstream.requests_to("/feed")) == 3


def test_a_json_body_and_query_parameters_are_sent(upstream: Upstream, fetch: Fetch) -> None:
    upstream.serve("/api", '{"ok": true}', Content_Type="application/json")
    response = fetch(
        lambda http: http.request("POST", upstream.url("/api?a=1"), params={"b": 2}, json={"x": [1, "é"]}),
        allow_private=True,
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["Content-Type"] == "application/json"
    seen = upstream.requests_to("/api")[0]
    assert seen.query == {"a": ["1"], "b": ["2"]}
    assert json.loads(seen.body) == {"x": [1, "é"]}
    assert seen.headers["content-type"].startswith("application/json")


class Server:
    """Answers 204 to each request; counts connections; `close_after_answer` hangs up after each one
    (without saying so in a header, as a server whose keep-alive timeout ran out does)."""

    def __init__(self, *, close_after_answer: bool = False) -> None:
        self.close_after_answer = close_after_answer
        self.connections = 0
        self.open_now = 0
        self.most_open = 0
        self.requests = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                self.requests += 1
                await asyncio.sleep(0.01)
                writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                if self.close_after_answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_now -= 1
            writer.close()


async def serving(server: Server) -> tuple[asyncio.Server, str]:
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    return listening, f"http://127.0.0.1:{port}/hook"


def test_many_requests_share_at_most_the_limit_of_kept_alive_connections(run: Run[Any]) -> None:
    server = Server()

    async def main() -> list[int]:
        listening, url = await serving(server)
        async with listening, SafeHttp(allow_private=True, max_connections=4) as http:
            first = await asyncio.gather(*(http.request("POST", url, content=b"{}") for _ in range(40)))
            second = await asyncio.gather(*(http.request("POST", url, content=b"{}") for _ in range(40)))
        return [response.status_code for response in first + second]

    assert run(main()) == [204] * 80
    assert server.requests == 80
    assert server.most_open <= 4
    assert server.connections <= 4


def test_a_kept_alive_connection_the_server_closed_is_not_reused(run: Run[Any]) -> None:
    server = Server(close_after_answer=True)

    async def main() -> list[int]:
        listening, url = await serving(server)
        statuses = []
        async with listening, SafeHttp(allow_private=True, max_connections=2) as http:
            for _ in range(5):
                statuses.append((await http.request("POST", url, content=b"{}")).status_code)
                await asyncio.sleep(0.05)  # the server's hang-up reaches the client's socket
        return statuses

    assert run(main()) == [204] * 5
    assert server.connections == 5
