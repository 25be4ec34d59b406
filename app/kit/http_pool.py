"""httpcore's connection pool, handing out connections in one pass over them.

httpcore's own `_assign_requests_to_connections` runs when a request arrives and again when its response
is closed. Each time it asks every connection whether it has expired (for an idle HTTP/1.1 connection,
a poll of its socket) and, for each idle one, counts all the connections again: quadratic in the pool's
size. With the event lanes' 64 kept-alive connections that was about half the worker's CPU.

`LeanPool` keeps httpcore's promises at a linear cost:

- the connection about to be handed out is asked whether it has expired first, as httpcore asks, so a
  keep-alive connection the server closed (or one that sat past its keep-alive expiry) is closed, never
  reused, and the next one is tried;
- the whole pool is swept (closed, expired and surplus idle connections dropped) at most once a second
  rather than at every request and response: an idle connection the server closed meanwhile holds its
  socket until the sweep or until it would be handed out, whichever comes first.

It overrides one private method of httpcore 1.x (pinned in pyproject.toml) and reads the pool's private
attributes; tests/kit/test_http_pool.py exercises it through SafeHttp.
"""

from __future__ import annotations

import time

import httpcore
from httpcore._async.interfaces import AsyncConnectionInterface

SWEEP_EVERY = 1.0


class LeanPool(httpcore.AsyncConnectionPool):
    _swept_at = 0.0

    def _assign_requests_to_connections(self) -> list[AsyncConnectionInterface]:
        closing: list[AsyncConnectionInterface] = []
        now = time.monotonic()
        if now - self._swept_at >= SWEEP_EVERY:
            self._swept_at = now
            self._sweep(closing)
        for pool_request in self._requests:
            if not pool_request.is_queued():
                continue
            connection = self._connection_for(pool_request.request.url.origin, closing)
            if connection is None:
                # No connection is free and none may be opened: the pool is all HTTP/1.1 connections
                # busy with a request (this pool never speaks HTTP/2), so no later request gets one either.
                break
            pool_request.assign_to_connection(connection)
        return closing

    def _sweep(self, closing: list[AsyncConnectionInterface]) -> None:
        for connection in list(self._connections):
            if connection.is_closed():
                self._connections.remove(connection)
            elif connection.has_expired():
                self._connections.remove(connection)
                closing.append(connection)
        surplus = len(self._connections) - self._max_keepalive_connections
        if surplus > 0:
            for connection in [c for c in self._connections if c.is_idle()][:surplus]:
                self._connections.remove(connection)
                closing.append(connection)

    def _connection_for(
        self, origin: httpcore.Origin, closing: list[AsyncConnectionInterface]
    ) -> AsyncConnectionInterface | None:
        """A free connection to `origin` that has not expired, else a new one if the pool has room (made
        by closing an idle connection to another origin if need be), else None."""
        spare: AsyncConnectionInterface | None = None
        for connection in list(self._connections):
            if connection.is_closed():
                self._connections.remove(connection)
            elif connection.can_handle_request(origin) and connection.is_available():
                if not connection.has_expired():
                    return connection
                self._connections.remove(connection)
                closing.append(connection)
            elif spare is None and connection.is_idle():
                spare = connection
        if len(self._connections) >= self._max_connections:
            if spare is None:
                return None
            self._connections.remove(spare)
            closing.append(spare)
        connection = self.create_connection(origin)
        self._connections.append(connection)
        return connection
