"""An effect's body is read whole within the route's limit, and forwarded decoded."""

from __future__ import annotations

import gzip
import io
from collections.abc import AsyncIterator

from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog

TOOL_CALL = {"Idem-Batch": "b", "Idem-Tool-Call": "c"}


async def test_a_compressed_effect_body_is_forwarded_decoded(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    body = gzip.compress(b'{"content":"zipped"}')
    response = await client.post(
        "/up/messages",
        data=body,
        headers={**TOOL_CALL, "Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert response.status == 200
    # What the upstream gets is what the effect's identity was taken from.
    assert effects.effects[-1].body == b'{"content":"zipped"}'
    assert "Content-Encoding" not in effects.effects[-1].headers


async def test_body_over_the_route_limit_is_413(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    too_big = io.BytesIO(b"x" * (10 * 1024 * 1024 + 1))
    response = await client.post("/up/messages", data=too_big, headers=TOOL_CALL)
    assert response.status == 413

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(11):
            yield b"x" * (1024 * 1024)

    chunked = await client.post("/up/messages", data=chunks(), headers=TOOL_CALL)
    assert chunked.status == 413
    assert effects.count() == 0
