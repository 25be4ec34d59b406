"""A TCP relay on loopback in front of a server (PostgreSQL), which a test can cut: every connection
through it closed at once, and each new one closed as soon as it is accepted, until it is restored."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class TcpRelay:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.cut_off = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        """Close every connection through the relay, and every new one as soon as it comes."""
        with self._lock:
            self.cut_off.set()
            for sock in self._open:
                _close(sock)
            self._open.clear()

    def restore(self) -> None:
        self.cut_off.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self.listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.cut_off.is_set():
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                # A connection accepted just before a cut must not outlive it: checked under the lock
                # that `cut` holds while it closes the open ones.
                if self.cut_off.is_set():
                    _close(client)
                    _close(upstream)
                    continue
                self._open.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)
            with self._lock:
                self._open.discard(source)
                self._open.discard(sink)


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def tcp_relay(host: str, port: int) -> Iterator[TcpRelay]:
    relay = TcpRelay(host, port)
    relay.start()
    try:
        yield relay
    finally:
        relay.close()
