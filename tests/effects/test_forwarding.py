"""An attempt as the upstream answers it: what each failure and each status leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordKey, RecordState
from tests.effects.test_flow import TOOL_CALL, write_policy
from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog


async def test_upstream_429_frees_the_key(make_proxy: ProxyFactory, effects: EffectLog) -> None:
    client, _ = await make_proxy()
    for _ in range(2):
        response = await client.post("/up/status/429", data=b"{}", headers=TOOL_CALL)
        assert response.status == 429
        assert response.headers["Idem-Outcome"] == "forwarded"
    assert effects.count("/status/429") == 2


async def test_ambiguous_5xx_makes_the_outcome_unknown(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store)
    first = await client.post("/up/status/500", data=b"{}", headers=TOOL_CALL)
    repeat = await client.post("/up/status/500", data=b"{}", headers=TOOL_CALL)
    problem = await repeat.json(content_type=None)

    assert first.status == 500
    assert repeat.status == 409
    assert problem["type"].endswith("/outcome-unknown")
    assert problem["review"].startswith("/v1/review/")
    assert repeat.headers["x-should-retry"] == "false"
    assert effects.count("/status/500") == 1
    assert [r.state for r in await store.list_unknown("default")] == [RecordState.UNKNOWN]


async def test_upstream_timeout_after_send_is_504_then_unknown(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy(**{"upstreams.up.read_timeout_s": 0.3})
    first = await client.post("/up/hang", data=b"{}", headers=TOOL_CALL)
    repeat = await client.post("/up/hang", data=b"{}", headers=TOOL_CALL)
    assert first.status == 504
    assert (await first.json(content_type=None))["type"].endswith("/upstream-timeout")
    assert repeat.status == 409
    assert repeat.headers["Idem-Outcome"] == "outcome-unknown"
    assert effects.count("/hang") == 1


async def test_connection_lost_after_send_is_unknown(
    make_proxy: ProxyFactory, effects: EffectLog
) -> None:
    client, _ = await make_proxy()
    first = await client.post("/up/drop", data=b"{}", headers=TOOL_CALL)
    repeat = await client.post("/up/drop", data=b"{}", headers=TOOL_CALL)
    assert first.status == 502
    assert first.headers["Idem-Outcome"] == "upstream-disconnected"
    assert repeat.headers["Idem-Outcome"] == "outcome-unknown"
    assert effects.count("/drop") == 1


async def test_unreachable_upstream_frees_the_key(
    make_proxy: ProxyFactory, unused_tcp_port: int
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(
        store=store, **{"upstreams.up.url": f"http://127.0.0.1:{unused_tcp_port}"}
    )
    for _ in range(2):
        response = await client.post("/up/messages", data=b"{}", headers=TOOL_CALL)
        assert response.status == 502
        assert response.headers["Idem-Outcome"] == "upstream-unreachable"
        assert response.headers["x-should-retry"] == "true"
    key = response.headers["Idem-Key"]
    agent, _, effect_id = key.partition("/")
    record = await store.get(RecordKey(agent, effect_id))
    assert record is not None
    assert record.state is RecordState.NOT_APPLIED
    assert record.attempts == 2


async def test_a_lost_generation_may_simply_run_again(
    make_proxy: ProxyFactory, effects: EffectLog, tmp_path: Path
) -> None:
    client, _ = await make_proxy(policy=write_policy(tmp_path, "effect: generation"))
    first = await client.post("/up/drop", data=b"{}", headers=TOOL_CALL)
    assert first.status == 502
    assert first.headers["x-should-retry"] == "true"
    assert first.headers["Retry-After"] == "1"
    again = await client.post("/up/drop", data=b"{}", headers=TOOL_CALL)
    assert again.headers["Idem-Outcome"] == "upstream-disconnected"
    assert effects.count("/drop") == 2


@pytest.mark.parametrize(("accepted", "asked"), [("br, gzip, zstd", "gzip"), ("br", "identity")])
async def test_an_effect_asks_the_upstream_only_for_codings_the_proxy_can_read(
    make_proxy: ProxyFactory, effects: EffectLog, accepted: str, asked: str
) -> None:
    client, _ = await make_proxy()
    headers = {**TOOL_CALL, "Accept-Encoding": accepted}
    await client.post("/up/messages", data=b'{"content":"hi"}', headers=headers)
    read = await client.get("/up/headers", headers={"Accept-Encoding": accepted})

    assert effects.effects[-1].headers["Accept-Encoding"] == asked
    # A read is passed through as asked: the proxy records nothing of it.
    assert dict((await read.json())["headers"])["Accept-Encoding"] == accepted
