"""Hostile requests against ``idemproxy serve``: every answer clean, no other host ever reached.

Each test ends by checking the proxy still serves an ordinary effect and has logged no
unhandled error, and that the trap listener (a host the proxy is not configured for) never got
a connection.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.fuzz.conftest import MAX_BODY_BYTES, Served, upstream_paths, within_base
from tests.support.rawhttp import read_answer, request_bytes

pytestmark = pytest.mark.e2e

Headers = list[tuple[str | bytes, str | bytes]]
KEY: Headers = [("Idempotency-Key", "abuse-1")]


def hostile_targets(trap_port: int) -> list[str]:
    trap = f"127.0.0.1:{trap_port}"
    return [
        f"http://{trap}/up/x",
        f"http://{trap}/",
        f"//{trap}/up/x",
        f"/{trap}/x",
        f"/up/../../{trap}/x",
        "/up/../x",
        "/up/%2e%2e/%2e%2e/x",
        "/up/%2E%2E%2F%2E%2E%2Fx",
        "/up/..%5C..%5Cx",
        "/up/x/..",
        "/up/./x",
        "/%2e%2e/up/x",
        "/up%2F..%2Fx",
        f"/up@{trap}/x",
        "*",
        trap,
    ]


def test_absolute_form_traversal_and_authority_targets_reach_no_other_host(
    served: Served,
) -> None:
    before = len(upstream_paths(served))
    for target in hostile_targets(served.trap.port):
        for method in ("GET", "POST"):
            headers: Headers = [*KEY, ("X-Forwarded-Host", f"127.0.0.1:{served.trap.port}")]
            answer = served.send(request_bytes(method, target, headers, b"{}"))
            assert answer is not None, target
            assert answer.status in (400, 404), (method, target, answer)
    connect = f"CONNECT 127.0.0.1:{served.trap.port} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    answer = served.send(connect, timeout_s=2)
    assert answer is None or 400 <= answer.status < 500
    assert len(upstream_paths(served)) == before  # refused, so nothing was forwarded at all
    served.assert_still_serving()


def test_a_host_header_cannot_redirect_a_forwarded_request(served: Served) -> None:
    trap = f"127.0.0.1:{served.trap.port}"
    headers: Headers = [("Host", trap), ("X-Forwarded-Host", trap)]
    request = request_bytes("GET", "/up/v1/items", headers)
    answer = served.send(request)
    assert answer is not None
    assert answer.status == 200
    assert upstream_paths(served)[-1] == "/api/v1/items"
    served.assert_still_serving()


@pytest.mark.parametrize(
    ("name", "value", "count"),
    [
        ("X-Big", "v" * 8_000, 1),  # under aiohttp's 8190-byte field limit: forwarded
        ("X-Big", "v" * 70_000, 1),
        ("X-Big", "v" * 2_000_000, 1),
        ("X-" + "n" * 70_000, "v", 1),
        ("X-Many", "v", 90),  # under the 128-header limit (and the upstream's 100): forwarded
        ("X-Many", "v", 5_000),
        ("X-Many", "v", 100_000),
    ],
    ids=["8k-value", "70k-value", "2M-value", "70k-name", "90-headers", "5k", "100k"],
)
def test_absurd_headers_get_a_clean_answer(
    served: Served, name: str, value: str, count: int
) -> None:
    before = len(upstream_paths(served))
    headers: Headers = [("Idempotency-Key", f"big-{len(name)}-{len(value)}-{count}")]
    headers += [(name, value)] * count
    answer = served.send(request_bytes("POST", "/up/effects", headers, b"{}"), timeout_s=30)
    fits = len(name) + len(value) < 8190 and count < 120
    assert answer is not None
    assert answer.status == (200 if fits else 400)
    assert len(upstream_paths(served)) == before + int(fits)
    served.assert_still_serving()


def test_a_malformed_request_is_one_warning_without_its_bytes(served: Served) -> None:
    secret = "sk-live-malformed-0123456789"
    headers: Headers = [("Authorization", f"Bearer {secret}" + "x" * 9000)]
    answer = served.send(request_bytes("POST", "/up/effects", headers, b"{}"))
    assert answer is not None
    assert answer.status == 400
    log = served.proxy.output()
    assert "malformed request refused with 400 (LineTooLong)" in log
    assert secret not in log
    served.assert_still_serving()


def test_a_giant_request_line_gets_a_clean_answer(served: Served) -> None:
    answer = served.send(request_bytes("POST", "/up/" + "a" * 100_000, KEY, b"{}"))
    assert answer is not None
    assert answer.status == 400
    served.assert_still_serving()


def test_a_body_at_the_limit_passes_and_one_byte_more_does_not(served: Served) -> None:
    at_limit = request_bytes("POST", "/up/effects", [("Idempotency-Key", "at")], b"x" * 1024)
    over = request_bytes("POST", "/up/effects", [("Idempotency-Key", "over")], b"x" * 1025)
    before = len(upstream_paths(served))
    ok, refused = served.send(at_limit), served.send(over)
    assert ok is not None
    assert ok.status == 200
    assert served.upstream.recording.snapshot()[-1].body == b"x" * MAX_BODY_BYTES
    assert refused is not None
    assert refused.status == 413
    assert refused.headers["idem-outcome"] == "body-too-large"
    assert len(upstream_paths(served)) == before + 1
    served.assert_still_serving()


def test_a_chunked_body_over_the_limit_is_refused_without_reading_it_all(
    served: Served,
) -> None:
    chunk = b"x" * 600
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4)) + b"0\r\n\r\n"
    request = (
        b"POST /up/effects HTTP/1.1\r\nHost: x\r\nIdempotency-Key: chunky\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body
    )
    before = len(upstream_paths(served))
    answer = served.send(request)
    assert answer is not None
    assert answer.status == 413
    assert len(upstream_paths(served)) == before
    served.assert_still_serving()


def test_broken_chunked_framing_is_refused_and_sends_nothing(served: Served) -> None:
    request = (
        b"POST /up/effects HTTP/1.1\r\nHost: x\r\nIdempotency-Key: broken-chunks\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\nabcd\r\nzz\r\n"
    )
    before = len(upstream_paths(served))
    answer = served.send(request)
    assert answer is not None
    assert answer.status == 400
    assert len(upstream_paths(served)) == before
    served.assert_still_serving()


def test_a_huge_declared_length_is_refused_at_once(served: Served) -> None:
    head = (
        b"POST /up/effects HTTP/1.1\r\nHost: x\r\nIdempotency-Key: huge\r\n"
        b"Content-Length: 999999999999\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", served.proxy.port), timeout=5) as sock:
        sock.sendall(head)
        answer = read_answer(sock)
    assert answer is not None
    assert answer.status == 413
    served.assert_still_serving()


def test_a_client_gone_mid_body_sends_nothing_upstream(served: Served) -> None:
    before = len(upstream_paths(served))
    head = (
        b"POST /up/effects HTTP/1.1\r\nHost: x\r\nIdempotency-Key: cut\r\n"
        b"Content-Length: 100\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", served.proxy.port), timeout=5) as sock:
        sock.sendall(head + b"x" * 40)
        time.sleep(0.2)
    time.sleep(0.3)
    assert len(upstream_paths(served)) == before
    # The same key, sent whole, is a first attempt: the cut request left no record behind.
    whole = request_bytes("POST", "/up/effects", [("Idempotency-Key", "cut")], b"y" * 100)
    answer = served.send(whole)
    assert answer is not None
    assert (answer.status, answer.headers["idem-outcome"]) == (200, "forwarded")
    served.assert_still_serving()


def trickle(port: int, data: bytes, gap_s: float, stop: threading.Event) -> None:
    """Send ``data`` a byte at a time, as a slowloris client does, until told to stop."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for byte in data:
            if stop.wait(gap_s):
                return
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return


def test_slow_clients_do_not_starve_the_others(served: Served) -> None:
    stop = threading.Event()
    slow_head = b"POST /up/effects HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 500
    slow_body = (
        b"POST /up/effects HTTP/1.1\r\nHost: x\r\nIdempotency-Key: slow-body\r\n"
        b"Content-Length: 500\r\n\r\n" + b"b" * 500
    )
    clients = [
        threading.Thread(target=trickle, args=(served.proxy.port, data, 0.1, stop))
        for data in [slow_head] * 60 + [slow_body] * 20
    ]
    before = len(upstream_paths(served))
    for client in clients:
        client.start()
    try:
        time.sleep(0.5)
        for i in range(20):
            started = time.monotonic()
            request = request_bytes("POST", "/up/effects", [("Idempotency-Key", f"fast-{i}")])
            answer = served.send(request)
            assert answer is not None
            assert answer.status == 200
            assert time.monotonic() - started < 2
    finally:
        stop.set()
        for client in clients:
            client.join()
    # Only the fast requests reached the upstream: a half-sent body is never forwarded.
    assert len(upstream_paths(served)) == before + 20
    assert within_base(upstream_paths(served))
    served.assert_still_serving()
