"""A loopback TCP forwarder that a test can cut, like a network partition on one link.

It runs on threads, so a test can cut it while its peers (redis-server processes) keep running:
the replica of a Sentinel set reaches its master through one, and a cut leaves the master
serving and acknowledging writes that the replica never gets.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

CHUNK_BYTES = 64 * 1024


class Forwarder:
    """Accepts on ``listen_port`` and relays each connection to ``target_port``."""

    def __init__(self, listen_port: int, target_port: int) -> None:
        self.listen_port = listen_port
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", listen_port), reuse_port=False)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, name="forwarder", daemon=True)

    def __enter__(self) -> Forwarder:
        self._acceptor.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self) -> None:
        """Drop every relayed connection and refuse new ones until :meth:`mend`."""
        with self._lock:
            self._cut = True
            dropped, self._open = self._open, set()
        for sock in dropped:
            _drop(sock)

    def mend(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.cut()
        # Wakes the acceptor out of accept().
        _drop(self._listener)
        self._acceptor.join(timeout=5)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                closed, cut = self._closed, self._cut
            if closed:
                _drop(client)
                return
            if cut:
                _drop(client)
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=2)
            except OSError:
                _drop(client)
                continue
            server.settimeout(None)
            with self._lock:
                cut = self._cut or self._closed  # cut while this one was connecting
                if not cut:
                    self._open.update((client, server))
            if cut:
                _drop(client)
                _drop(server)
                continue
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes one way until either side goes; then close both."""
    try:
        while chunk := source.recv(CHUNK_BYTES):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        _drop(source)
        _drop(sink)


def _drop(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
