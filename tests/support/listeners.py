"""Loopback listeners for abuse tests: an upstream that records every request, and a trap.

Both run on threads, so synchronous tests (hypothesis, raw sockets) can use them while
``idemproxy serve`` runs as a process.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


@dataclass
class Recording:
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, received: Received) -> None:
        with self.lock:
            self.requests.append(received)

    def snapshot(self) -> list[Received]:
        with self.lock:
            return list(self.requests)


class _Handler(BaseHTTPRequestHandler):
    """Answers every method with 200 and a JSON id; the server records the request."""

    protocol_version = "HTTP/1.1"
    server: RecordingServer

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        received = Received(self.command, self.path, tuple(self.headers.items()), body)
        self.server.recording.add(received)
        payload = orjson.dumps({"n": len(self.server.recording.requests)})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    # The names http.server dispatches on.
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _answer  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the recording is the log."""


class RecordingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.recording = Recording()

    @property
    def port(self) -> int:
        port: int = self.server_address[1]
        return port


@contextmanager
def recording_upstream() -> Iterator[RecordingServer]:
    server = RecordingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class ConnectionTrap:
    """A listener nothing should ever connect to: it counts every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def __enter__(self) -> ConnectionTrap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()
