"""Who is calling: the client's address as this server saw it (the rate limits' key, what a sign-up or
a session records)."""

from __future__ import annotations

from starlette.requests import HTTPConnection


def client_address(connection: HTTPConnection) -> str:
    return connection.client.host if connection.client else "unknown"
