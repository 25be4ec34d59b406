"""Outbound HTTP that cannot be turned against the service's own network (SSRF), or exhaust it.

Every request to a URL a user gave (feed sources, webhooks) goes through `SafeHttp`:

- the host name is resolved here, every address it resolves to is checked, and the connection is made
  to a checked address: a name that answers differently the second time (DNS rebinding) gains nothing;
- loopback, private, link-local (the cloud metadata address 169.254.169.254 among them), shared,
  multicast, reserved and unspecified addresses are refused, also when they hide inside an IPv6
  address (IPv4-mapped, 6to4, Teredo, NAT64), unless `allow_private` (TIDINGS_OUTBOUND_ALLOW_PRIVATE);
- redirects are never followed: the 3xx response is handed back, and the caller decides;
- the body is read as a stream and cut at `max_bytes`, counted after content decoding (so a gzip bomb
  stops at the cap, not at the end of its expansion), and the whole exchange has one deadline;
- proxies from the environment are ignored (a proxy would make the address check meaningless).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# 64:ff9b::/96 (RFC 6052): NAT64 gateways translate its last 32 bits into an IPv4 destination.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")


class OutboundError(Exception):
    """A request that could not be made or completed; `str()` is a message for a person."""


class BlockedDestination(OutboundError):
    """The URL names, or resolves to, an address the service must not reach."""


class InvalidUrl(OutboundError):
    pass


class ResponseTooLarge(OutboundError):
    """The body was larger than allowed; `status_code` is the response's status (it had arrived)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class OutboundTimeout(OutboundError):
    pass


class ConnectFailed(OutboundError):
    """DNS failure, connection refused or reset, TLS failure, or a malformed response."""


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries to its destination, if it is of a kind that does."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64 or ip in _NAT64_LOCAL:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    # IPv4-compatible (::a.b.c.d, deprecated) addresses other than :: and ::1.
    if int(ip) >> 32 == 0 and int(ip) > 1:
        return ipaddress.IPv4Address(int(ip))
    return None


def is_public_address(ip: IPAddress) -> bool:
    """True for an address on the public internet; False for loopback, private (RFC 1918, ULA),
    link-local, shared (100.64/10), documentation, multicast, reserved and unspecified addresses."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_ipv4(ip)
        if inner is not None:
            return is_public_address(inner)
        if ip.scope_id:
            return False
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved or ip.is_link_local or ip.is_loopback:
        return False
    return ip.is_global


def parse_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


# Said with every refusal of a non-public address: the operator's way to allow one (a feed or webhook
# on their own network), so the person refused knows what to ask for.
ALLOW_PRIVATE_HINT = "; the server's operator allows such addresses with TIDINGS_OUTBOUND_ALLOW_PRIVATE=true"


def literal_host_problem(url: str, *, allow_private: bool) -> str | None:
    """What is wrong with `url` before any DNS lookup (scheme, host, a literal non-public address,
    `localhost`), or None. For validating input; the request itself checks again after resolving."""
    try:
        parsed = httpx.URL(url)
        # Decoding the host can fail too: an `xn--` label that is not valid Punycode raises idna's
        # IDNAError (a ValueError) here, not in the constructor.
        host = parsed.host
    except (httpx.InvalidURL, TypeError, ValueError):
        return "is not a valid URL"
    if parsed.scheme not in ("http", "https"):
        return "must be an http or https URL"
    if not host:
        return "must name a host"
    if allow_private:
        return None
    ip = parse_ip(host)
    if ip is not None and not is_public_address(ip):
        return f"points to a non-public address ({ip}){ALLOW_PRIVATE_HINT}"
    lowered = host.lower().rstrip(".")
    if lowered == "localhost" or lowered.endswith(".localhost"):
        return f"points to a non-public address (localhost){ALLOW_PRIVATE_HINT}"
    return None


Resolver = Callable[[str, int], Awaitable[list[str]]]


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, as the operating system's resolver answers."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConnectFailed(f"could not resolve {host}: {exc}") from exc
    return [str(info[4][0]) for info in infos]


class GuardedResolver(AbstractResolver):
    """aiohttp's name resolution with the address check between resolving and connecting: aiohttp
    connects to exactly the addresses this returns (a literal IP in the URL never reaches a resolver;
    `literal_host_problem` has checked it before the request)."""

    def __init__(self, *, allow_private: bool, resolver: Resolver = system_resolver) -> None:
        self.allow_private = allow_private
        self.resolver = resolver

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        candidates: list[IPAddress] = []
        for answer in await self.resolver(host, port):
            # A scoped IPv6 answer (fe80::1%eth0) is link-local whatever its scope.
            address = parse_ip(answer.split("%")[0])
            if address is not None and address not in candidates:
                candidates.append(address)
        if not candidates:
            raise ConnectFailed(f"{host} has no address")
        if not self.allow_private:
            # Every address must be public: a name that also resolves to an internal address is
            # refused, even if the public one would be tried first (the order is the resolver's choice).
            blocked = [ip for ip in candidates if not is_public_address(ip)]
            if blocked:
                raise BlockedDestination(
                    f"{host} resolves to a non-public address ({blocked[0]}){ALLOW_PRIVATE_HINT}"
                )
        return [
            {
                "hostname": host,
                "host": str(ip),
                "port": port,
                "family": socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for ip in candidates
        ]

    async def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class SafeResponse:
    status_code: int
    # Case-insensitive, as HTTP header names are.
    headers: Mapping[str, str]
    content: bytes
    url: str
    elapsed: float

    @property
    def is_redirect(self) -> bool:
        return 300 <= self.status_code < 400 and self.status_code != 304

    def header_charset(self) -> str | None:
        content_type = self.headers.get("content-type", "")
        for part in content_type.split(";")[1:]:
            name, _, value = part.strip().partition("=")
            if name.lower() == "charset" and value:
                return value.strip().strip("\"'").lower() or None
        return None


class SafeHttp:
    """An async HTTP client for untrusted destinations. One per process (it pools connections).

    Built on aiohttp, whose HTTP/1.1 client (a C parser, connections kept alive in a plain pool) costs
    about a tenth of the CPU per request of the httpx client it replaced (docs/performance.md, Events
    out). Its session is made on first use in the running event loop, and anew if a later call runs in
    another loop (each `asyncio.run` of a test or a CLI command)."""

    def __init__(
        self,
        *,
        allow_private: bool = False,
        max_bytes: int = 5 * 1024 * 1024,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        user_agent: str = "tidings",
        max_connections: int = 100,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.allow_private = allow_private
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.user_agent = user_agent
        self.max_connections = max_connections
        self.resolver = resolver
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._session_loop is not loop:
            self._session_loop = loop
            session = self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self.max_connections,
                    resolver=GuardedResolver(allow_private=self.allow_private, resolver=self.resolver),
                    # Every new connection resolves and checks the name again.
                    use_dns_cache=False,
                ),
                # No proxies from the environment: a proxy would make the address check meaningless.
                trust_env=False,
                headers={"User-Agent": self.user_agent},
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout),
                # Content-Encoding is decoded as the body is read: the cap counts what it expands to.
                auto_decompress=True,
            )
        return session

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._session_loop is asyncio.get_running_loop():
            await session.close()

    async def __aenter__(self) -> SafeHttp:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str | int] | None = None,
        content: bytes | None = None,
        json: Any = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> SafeResponse:
        """One exchange; raises an `OutboundError` subclass for anything but a complete response.

        Any status, 3xx included, is a complete response: the caller judges it.
        """
        problem = literal_host_problem(url, allow_private=self.allow_private)
        if problem is not None:
            kind = InvalidUrl if "non-public" not in problem else BlockedDestination
            raise kind(f"{url} {problem}")
        limit = self.max_bytes if max_bytes is None else max_bytes
        deadline = self.timeout if timeout is None else timeout
        started = time.monotonic()
        try:
            async with (
                asyncio.timeout(deadline),
                self._session_here().request(
                    method,
                    url,
                    headers=headers,
                    params=params,
                    data=content,
                    json=json,
                    allow_redirects=False,
                ) as response,
            ):
                length = response.headers.get("content-length", "")
                if length.isdigit() and int(length) > limit:
                    raise ResponseTooLarge(
                        f"the response is larger than {limit} bytes ({length})", response.status
                    )
                body = bytearray()
                async for chunk in response.content.iter_any():
                    body += chunk
                    if len(body) > limit:
                        raise ResponseTooLarge(f"the response is larger than {limit} bytes", response.status)
        except TimeoutError as exc:
            # asyncio.timeout's deadline, or aiohttp's connect timeout (also a TimeoutError).
            raise OutboundTimeout(f"no complete response within {deadline:g} s") from exc
        except aiohttp.InvalidURL as exc:
            # What aiohttp alone refuses, such as a legacy numeric IPv4 host (http://2130706433/).
            raise InvalidUrl(f"{url} is not a valid URL: {exc}") from exc
        except aiohttp.ClientPayloadError as exc:
            raise ConnectFailed(f"the response could not be read or decoded: {exc}") from exc
        except (aiohttp.ClientError, ValueError) as exc:
            # ValueError: a header value aiohttp will not send (a line break in it).
            raise ConnectFailed(_describe(exc)) from exc
        return SafeResponse(
            status_code=response.status,
            headers=response.headers,
            content=bytes(body),
            url=str(response.url),
            elapsed=time.monotonic() - started,
        )

    async def get(self, url: str, **options: typing.Any) -> SafeResponse:
        return await self.request("GET", url, **options)


def _describe(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]
