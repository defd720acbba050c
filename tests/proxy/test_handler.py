"""The proxy as a reverse proxy: routing, header hygiene, streaming, and refusing bad input."""

from __future__ import annotations

import asyncio
import io
import time

import orjson

from idemproxy.store.memory import MemoryStore
from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog

TOOL_CALL = {"Idem-Batch": "b", "Idem-Tool-Call": "c"}


async def test_headers_are_cleaned_both_ways(make_proxy: ProxyFactory) -> None:
    client, _ = await make_proxy()
    response = await client.get(
        "/up/headers?b=2&a=1",
        headers={
            "Connection": "keep-alive, X-Hop",
            "X-Hop": "secret-for-this-hop",
            "X-End": "kept",
            "Keep-Alive": "timeout=5",
            "Idem-Batch": "b",
            "Idem-Tool-Call": "c",
            "TE": "trailers",
        },
    )
    seen = dict((await response.json())["headers"])
    assert seen["X-End"] == "kept"
    for dropped in ("X-Hop", "Keep-Alive", "Idem-Batch", "Idem-Tool-Call", "TE"):
        assert dropped not in seen
    assert (await response.json())["path_qs"] == "/api/headers?b=2&a=1"


async def test_upstream_host_header_is_the_upstream_s(make_proxy: ProxyFactory) -> None:
    client, state = await make_proxy()
    response = await client.get("/up/headers", headers={"Host": "evil.example"})
    seen = dict((await response.json())["headers"])
    assert seen["Host"] == state.upstreams["up"].base_url.split("//")[1].split("/")[0]


async def test_sse_streams_as_it_arrives_and_replays_identically(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    started = time.monotonic()
    response = await client.post("/up/sse?events=10&gap_ms=100", data=b"{}", headers=TOOL_CALL)
    first_chunk = await response.content.readline()
    first_chunk_s = time.monotonic() - started
    rest = await response.read()
    total_s = time.monotonic() - started
    assert first_chunk == b"id: 0\n"
    # The first event arrives long before the stream (10 x 100 ms) ends.
    assert first_chunk_s < total_s / 2

    replay = await client.post("/up/sse?events=10&gap_ms=100", data=b"{}", headers=TOOL_CALL)
    assert replay.headers["Idem-Outcome"] == "replayed"
    assert replay.headers["Content-Type"] == "text/event-stream"
    assert await replay.read() == first_chunk + rest
    assert effects.count("/sse") == 1


async def test_large_response_passes_through(make_proxy: ProxyFactory) -> None:
    client, _ = await make_proxy()
    response = await client.get("/up/big?bytes=3000000")
    assert len(await response.read()) == 3_000_000


async def test_large_effect_body_is_forwarded_whole(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    body = b"y" * (3 * 1024 * 1024)
    response = await client.post("/up/messages", data=io.BytesIO(body), headers=TOOL_CALL)
    assert response.status == 200
    assert effects.effects[-1].body == body


async def test_unknown_upstream_is_404_problem(make_proxy: ProxyFactory) -> None:
    client, _ = await make_proxy()
    response = await client.post("/nowhere/messages", data=b"{}", headers=TOOL_CALL)
    problem = await response.json(content_type=None)
    assert response.status == 404
    assert problem["type"].endswith("/unknown-upstream")
    assert "up" in problem["detail"]


async def test_dot_segments_are_refused(make_proxy: ProxyFactory, effects: EffectLog) -> None:
    client, _ = await make_proxy()
    for path in ("/up/../other/messages", "/up/%2e%2e/messages", "/up/a/./messages"):
        reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = await reader.read()
        writer.close()
        assert answer.startswith(b"HTTP/1.1 400"), (path, answer[:80])
    assert effects.count() == 0


async def test_absolute_form_requests_never_leave_for_their_host(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    writer.write(
        b"POST http://169.254.169.254/up/messages HTTP/1.1\r\nHost: 169.254.169.254\r\n"
        b"Idem-Batch: b\r\nIdem-Tool-Call: c\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 400")
    assert b"absolute" in answer
    assert effects.count() == 0


async def test_authorization_is_forwarded_but_never_stored(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store)
    secret = "Bearer sk-live-very-secret"
    response = await client.post(
        "/up/messages",
        data=b"{}",
        headers={**TOOL_CALL, "Authorization": secret, "Cookie": "sid=secret-cookie"},
    )
    assert response.status == 200
    assert effects.effects[-1].headers["Authorization"] == secret
    agent, _, effect_id = response.headers["Idem-Key"].partition("/")
    record = await store.get(type(next(iter(store._tables.records)))(agent, effect_id))
    assert record is not None
    assert record.response is not None
    dumped = repr(record) + orjson.dumps([list(h) for h in record.response.headers]).decode()
    assert "sk-live-very-secret" not in dumped
    assert "secret-cookie" not in dumped
    assert "session=secret" not in dumped  # the upstream's Set-Cookie


async def test_accounts_get_their_own_records_and_no_credential_is_stored(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, policy="stripe")

    async def charge(account: str, api_key: str) -> tuple[int, str, str]:
        headers = {
            "Idempotency-Key": "order-1",
            "Stripe-Account": account,
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/x-www-form-urlencoded",
        }
        response = await client.post("/up/v1/messages", data=b"amount=700", headers=headers)
        return response.status, response.headers["Idem-Outcome"], response.headers["Idem-Key"]

    _, outcome_a, key_a = await charge("acct_A", "sk_test_secret_of_a")
    _, outcome_b, key_b = await charge("acct_B", "sk_test_secret_of_b")
    _, rolled, key_rolled = await charge("acct_A", "sk_test_rolled_secret_of_a")

    assert (outcome_a, outcome_b, rolled) == ("forwarded", "forwarded", "replayed")
    assert key_a != key_b
    assert key_rolled == key_a
    assert effects.count() == 2
    dumped = repr(store._tables.records) + repr(store._tables.events)
    for secret in ("secret_of_a", "secret_of_b", "acct_A", "acct_B"):
        assert secret not in dumped
