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
import select
import socket
import ssl
import time
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from app.kit.http_pool import LeanPool

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
        return f"points to a non-public address ({ip})"
    lowered = host.lower().rstrip(".")
    if lowered == "localhost" or lowered.endswith(".localhost"):
        return "points to a non-public address (localhost)"
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


def _is_readable(sock: socket.socket | None) -> bool:
    """Whether an idle connection's socket has something to read: for a keep-alive connection, that
    the server closed it (or sent what it should not have)."""
    if sock is None or sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class QuickStream(httpcore.AsyncNetworkStream):
    """httpcore's anyio stream with its socket looked up once. The connection pool asks every idle
    connection whether it is readable each time it hands out a connection; anyio answers that by
    rebuilding a dictionary of the stream's attributes on every call, which dominated the cost of
    many small requests over kept-alive connections."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self.inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        return QuickStream(await self.inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return _is_readable(self._socket)
        if info == "socket":
            return self._socket
        return self.inner.get_extra_info(info)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the address check between resolving and connecting."""

    def __init__(
        self,
        *,
        allow_private: bool,
        resolver: Resolver = system_resolver,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self.resolver = resolver
        self.inner = inner or httpcore.AnyIOBackend()

    async def resolve(self, host: str, port: int) -> list[str]:
        literal = parse_ip(host)
        if literal is not None:
            candidates: list[IPAddress] = [literal]
        else:
            candidates = []
            for answer in await self.resolver(host, port):
                # A scoped IPv6 answer (fe80::1%eth0) is link-local whatever its scope.
                address = parse_ip(answer.split("%")[0])
                if address is not None and address not in candidates:
                    candidates.append(address)
        if not candidates:
            raise ConnectFailed(f"{host} has no address")
        if self.allow_private:
            return [str(ip) for ip in candidates]
        # Every address must be public: a name that also resolves to an internal address is refused,
        # even if the public one would be tried first (the order of answers is the resolver's choice).
        blocked = [ip for ip in candidates if not is_public_address(ip)]
        if blocked:
            raise BlockedDestination(f"{host} resolves to a non-public address ({blocked[0]})")
        return [str(ip) for ip in candidates]

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.resolve(host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                stream = await self.inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
                return QuickStream(stream)
            except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError) as exc:
                last = exc
        raise last or ConnectFailed(f"{host} has no address")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise BlockedDestination("unix sockets are not reachable")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport on a connection pool whose connections go through `GuardedBackend`."""

    def __init__(
        self,
        *,
        allow_private: bool,
        limits: httpx.Limits,
        resolver: Resolver = system_resolver,
        verify: bool = True,
    ) -> None:
        super().__init__(verify=verify, limits=limits, trust_env=False)
        ssl_context = httpx.create_ssl_context(verify=verify, trust_env=False)
        # httpx builds its pool in __init__ without a way to pass a network backend: replace it (with
        # httpcore's pool that hands out connections at a linear cost, app/kit/http_pool.py).
        self._pool = LeanPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(allow_private=allow_private, resolver=resolver),
        )


@dataclass(frozen=True, slots=True)
class SafeResponse:
    status_code: int
    headers: httpx.Headers
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
    """An async HTTP client for untrusted destinations. One per process (it pools connections)."""

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
        self.user_agent = user_agent
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client = httpx.AsyncClient(
            transport=GuardedTransport(allow_private=allow_private, limits=limits, resolver=resolver),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            headers={"User-Agent": user_agent},
        )

    async def aclose(self) -> None:
        await self._client.aclose()

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
            async with asyncio.timeout(deadline):
                request = self._client.build_request(
                    method, url, headers=headers, params=params, content=content, json=json
                )
                response = await self._client.send(request, stream=True)
                try:
                    length = response.headers.get("content-length", "")
                    if length.isdigit() and int(length) > limit:
                        raise ResponseTooLarge(
                            f"the response is larger than {limit} bytes ({length})", response.status_code
                        )
                    body = bytearray()
                    # aiter_bytes decodes Content-Encoding: the cap applies to what the bytes expand to.
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > limit:
                            raise ResponseTooLarge(
                                f"the response is larger than {limit} bytes", response.status_code
                            )
                finally:
                    await response.aclose()
        except TimeoutError as exc:
            raise OutboundTimeout(f"no complete response within {deadline:g} s") from exc
        except httpx.TimeoutException as exc:
            raise OutboundTimeout(f"timed out ({type(exc).__name__})") from exc
        except httpx.DecodingError as exc:
            raise ConnectFailed(f"the response could not be decoded: {exc}") from exc
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise ConnectFailed(_describe(exc)) from exc
        return SafeResponse(
            status_code=response.status_code,
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
