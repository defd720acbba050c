"""HTTP/1.1 over a plain socket, for requests no well-behaved client library would send."""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass

MAX_ANSWER_BYTES = 1 << 20


@dataclass(frozen=True)
class RawAnswer:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes  # as framed on the wire (a chunked body keeps its chunk lines)


def read_answer(sock: socket.socket) -> RawAnswer | None:
    """The response on ``sock``; None if the server closed without one.

    Reads to the end of a body whose length the head gives, else to EOF.
    """
    data = b""
    while len(data) < MAX_ANSWER_BYTES and not _complete(data):
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        data += chunk
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, status, *_ = status_line.split(" ")
    assert version.startswith("HTTP/1."), f"not an HTTP answer: {status_line!r}"
    return RawAnswer(int(status), _headers(lines), body)


def _headers(lines: list[str]) -> dict[str, str]:
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    length = _headers(head.decode("latin-1").split("\r\n")[1:]).get("content-length")
    return length is not None and length.isdigit() and len(body) >= int(length)


def exchange(port: int, request: bytes, timeout_s: float = 10.0) -> RawAnswer | None:
    """Send ``request`` whole and read the answer (the request asks to close after it).

    The socket is not half-closed: a server may take an early EOF as the client leaving.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        # The server may answer and close before it has taken all of the request.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)
        return read_answer(sock)


def request_bytes(
    method: str,
    target: str | bytes,
    headers: list[tuple[str | bytes, str | bytes]],
    body: bytes = b"",
) -> bytes:
    """A request with ``Connection: close`` (and ``Host`` unless given); bytes go out as given."""

    def raw(value: str | bytes) -> bytes:
        return value if isinstance(value, bytes) else value.encode("latin-1")

    lines = [raw(method) + b" " + raw(target) + b" HTTP/1.1"]
    if not any(raw(name).lower() == b"host" for name, _ in headers):
        lines.append(b"Host: 127.0.0.1")
    lines += [raw(name) + b": " + raw(value) for name, value in headers]
    lines += [b"Connection: close", b"Content-Length: " + str(len(body)).encode()]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body
