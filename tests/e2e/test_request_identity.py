"""A request's identity through `idemproxy serve`: the same effect however it is encoded.

Each test sends what real clients send (gzip with a fresh timestamp, multipart with a fresh
boundary, forms with a stray separator, records with fresh client timestamps) and counts what
the fake upstream received. Identity is decided before the store is asked, but the record it
keys lives in the store, so the tests run on SQLite and on a real Redis.
"""

from __future__ import annotations

import asyncio
import gzip
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

TOOL_CALL = {"Idem-Batch": "batch-1", "Idem-Tool-Call": "call-1"}
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
WINDOW_S = 1
POLICY = f"""
name: identity
routes:
  - name: post
    match: {{methods: [POST], path: /api/messages}}
    volatile_fields: [/nonce, /payload_json/nonce, /metadata/nonce, /writes/*/value/createdAt]
    external_id: /id
  - name: by_content
    match: {{methods: [POST], path: "/api/content/messages"}}
    on_missing_key: content
    content_window_s: {WINDOW_S}
default: {{name: other, effect: safe}}
"""


@pytest.fixture
def proxy(tmp_path: Path, upstream: FakeUpstream, store_url: str) -> Iterator[ServedProxy]:
    policy = tmp_path / "identity.yaml"
    policy.write_text(POLICY)
    served = ServedProxy.for_upstream(tmp_path, upstream.url, policy, store_url)
    with running(served):
        yield served


Answer = tuple[int, dict[str, str], bytes]


async def post(
    proxy: ServedProxy, path: str, body: bytes | aiohttp.FormData, headers: dict[str, str]
) -> Answer:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{proxy.url}/up{path}", data=body, headers=headers) as answer,
    ):
        return answer.status, dict(answer.headers), await answer.read()


def problem_code(body: bytes) -> str:
    document = orjson.loads(body)
    kind: str = document["type"]
    return kind.rsplit("/", 1)[-1]


async def test_the_same_json_gzipped_twice_is_one_effect(
    proxy: ServedProxy, upstream: FakeUpstream
) -> None:
    message = orjson.dumps({"content": "hello", "nonce": "1"})
    gzipped = {**TOOL_CALL, **JSON, "Content-Encoding": "gzip"}

    first = await post(proxy, "/api/messages", gzip.compress(message, mtime=1), gzipped)
    again_message = orjson.dumps({"content": "hello", "nonce": "2"})
    again = await post(proxy, "/api/messages", gzip.compress(again_message, mtime=2), gzipped)
    plain = await post(proxy, "/api/messages", again_message, {**TOOL_CALL, **JSON})

    assert first[0] == 200
    assert again[1]["Idem-Outcome"] == "replayed"
    assert plain[1]["Idem-Outcome"] == "replayed"  # the coding is no part of the identity
    sent = upstream.effects("/messages")
    assert len(sent) == 1
    # The upstream got the body decoded, the volatile nonce as the agent sent it.
    assert "Content-Encoding" not in sent[0]["headers"]
    assert orjson.loads(sent[0]["body"]) == {"content": "hello", "nonce": "1"}


async def test_a_deflated_body_is_decoded_too(proxy: ServedProxy, upstream: FakeUpstream) -> None:
    message = orjson.dumps({"content": "deflated"})
    headers = {**TOOL_CALL, **JSON, "Content-Encoding": "deflate"}

    first = await post(proxy, "/api/messages", zlib.compress(message), headers)

    assert first[0] == 200
    sent = upstream.effects("/messages")[0]
    assert "Content-Encoding" not in sent["headers"]
    assert int(sent["headers"]["Content-Length"]) == len(message)


@pytest.mark.parametrize(
    ("body", "coding", "status", "code"),
    [
        (b"\x1f\x8b not really gzip", "gzip", 400, "invalid-request"),
        (gzip.compress(b'{"a": 1}')[:-6], "gzip", 400, "invalid-request"),
        (b"\xce\xb2\x2e", "br", 415, "unsupported-content-encoding"),
        (gzip.compress(b" " * (11 * 1024 * 1024)), "gzip", 413, "body-too-large"),
    ],
)
async def test_a_body_that_cannot_be_decoded_is_refused_and_nothing_sent(
    proxy: ServedProxy, upstream: FakeUpstream, body: bytes, coding: str, status: int, code: str
) -> None:
    headers = {**TOOL_CALL, **JSON, "Content-Encoding": coding}

    answer = await post(proxy, "/api/messages", body, headers)

    assert answer[0] == status
    assert problem_code(answer[2]) == code
    assert "nothing was sent" in orjson.loads(answer[2])["detail"]
    if status == 415:
        assert answer[1]["Accept-Encoding"] == "gzip, deflate"
    assert upstream.effects("/messages") == []


async def test_multipart_bodies_with_new_boundaries_are_one_effect(
    proxy: ServedProxy, upstream: FakeUpstream
) -> None:
    def form(nonce: str) -> aiohttp.FormData:
        data = aiohttp.FormData()
        payload = orjson.dumps({"content": "see attached", "nonce": nonce}).decode()
        data.add_field("payload_json", payload)
        data.add_field("files[0]", b"figures", filename="report.txt")
        return data

    first = await post(proxy, "/api/messages", form("1"), TOOL_CALL)
    again = await post(proxy, "/api/messages", form("2"), TOOL_CALL)

    assert first[0] == 200
    assert again[1]["Idem-Outcome"] == "replayed"
    assert again[2] == first[2]
    assert len(upstream.effects("/messages")) == 1


async def test_form_fields_in_another_order_with_a_stray_separator_are_one_effect(
    proxy: ServedProxy, upstream: FakeUpstream
) -> None:
    first = await post(
        proxy, "/api/messages", b"amount=5&currency=usd&metadata[nonce]=1", {**TOOL_CALL, **FORM}
    )
    again = await post(
        proxy, "/api/messages", b"currency=usd&amount=5&metadata[nonce]=2&", {**TOOL_CALL, **FORM}
    )

    assert first[0] == 200
    assert again[1]["Idem-Outcome"] == "replayed"
    assert len(upstream.effects("/messages")) == 1


async def test_repeated_form_fields_in_another_pairing_are_another_effect(
    proxy: ServedProxy, upstream: FakeUpstream
) -> None:
    key = {"Idempotency-Key": "order-1", **FORM}
    first = b"items[][price]=A&items[][qty]=1&items[][price]=B&items[][qty]=5"
    swapped = b"items[][price]=A&items[][qty]=5&items[][price]=B&items[][qty]=1"

    await post(proxy, "/api/messages", first, key)
    reused = await post(proxy, "/api/messages", swapped, key)

    # The same key for a different order is refused, never answered with the first order.
    assert reused[0] == 422
    assert len(upstream.effects("/messages")) == 1


async def test_a_rerun_of_apply_writes_with_fresh_timestamps_is_one_effect(
    proxy: ServedProxy, upstream: FakeUpstream
) -> None:
    def writes(stamp: str) -> bytes:
        return orjson.dumps(
            {
                "repo": "did:plc:agent",
                "writes": [
                    {
                        "$type": "com.atproto.repo.applyWrites#create",
                        "collection": "app.bsky.feed.post",
                        "value": {"text": f"post {n}", "createdAt": f"{stamp}.{n}"},
                    }
                    for n in range(3)
                ],
            }
        )

    first = await post(proxy, "/api/messages", writes("2026-12-01T10:00:00"), {**TOOL_CALL, **JSON})
    again = await post(proxy, "/api/messages", writes("2026-12-01T10:05:00"), {**TOOL_CALL, **JSON})

    assert first[0] == 200
    assert again[1]["Idem-Outcome"] == "replayed"
    assert len(upstream.effects("/messages")) == 1


async def wait_for_bucket_edge(window_s: int, before_s: float) -> None:
    """Sleep until ``before_s`` before the next multiple of ``window_s`` on the wall clock."""
    delay_s = window_s - (time.time() % window_s) - before_s
    await asyncio.sleep(delay_s if delay_s > 0 else delay_s + window_s)


async def test_a_content_keyed_retry_across_a_window_edge_is_one_effect(
    proxy: ServedProxy, upstream: FakeUpstream
) -> None:
    body = orjson.dumps({"content": "no key at all"})
    await wait_for_bucket_edge(WINDOW_S, before_s=0.1)

    first = await post(proxy, "/api/content/messages", body, JSON)
    await asyncio.sleep(0.2)  # a retry that crosses a multiple of the window
    retry = await post(proxy, "/api/content/messages", body, JSON)
    await asyncio.sleep(WINDOW_S + 0.3)
    later = await post(proxy, "/api/content/messages", body, JSON)

    assert first[0] == 200
    assert retry[1]["Idem-Outcome"] == "replayed"
    # After the window the same content is a new effect.
    assert later[1]["Idem-Outcome"] == "forwarded"
    assert len(upstream.effects("/content/messages")) == 2
