"""The connection pool under SafeHttp (app/kit/http_pool.py) against a raw HTTP/1.1 server on loopback:
connections are kept alive and reused, never more than the limit, and a kept-alive connection the
server closed is not reused (the request goes on a new connection and succeeds)."""

from __future__ import annotations

import asyncio

from app.kit.safe_http import SafeHttp


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


def test_many_requests_share_at_most_the_limit_of_kept_alive_connections() -> None:
    server = Server()

    async def main() -> list[int]:
        listening, url = await serving(server)
        async with listening, SafeHttp(allow_private=True, max_connections=4) as http:
            first = await asyncio.gather(*(http.request("POST", url, content=b"{}") for _ in range(40)))
            second = await asyncio.gather(*(http.request("POST", url, content=b"{}") for _ in range(40)))
        return [response.status_code for response in first + second]

    assert asyncio.run(main()) == [204] * 80
    assert server.requests == 80
    assert server.most_open <= 4
    assert server.connections <= 4


def test_a_kept_alive_connection_the_server_closed_is_not_reused() -> None:
    server = Server(close_after_answer=True)

    async def main() -> list[int]:
        listening, url = await serving(server)
        statuses = []
        async with listening, SafeHttp(allow_private=True, max_connections=2) as http:
            for _ in range(5):
                statuses.append((await http.request("POST", url, content=b"{}")).status_code)
                await asyncio.sleep(0.05)  # the server's hang-up reaches the client's socket
        return statuses

    assert asyncio.run(main()) == [204] * 5
    assert server.connections == 5
