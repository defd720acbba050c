"""What an operator reads of a held request: method, path and body, never a secret."""

from __future__ import annotations

import orjson

from idemproxy.effects.summary import REDACTED, redacted
from idemproxy.store.memory import MemoryStore
from tests.proxy.conftest import ProxyFactory

ALWAYS: dict[str, object] = {"upstreams.up.approvals": {"bot_api": {}, "write": {}}}
KEY = {"Idem-Batch": "b", "Idem-Tool-Call": "c", "Authorization": "Bearer sk_live_123"}


def test_secret_named_members_are_redacted_at_any_depth() -> None:
    body = {"card": {"number": "4242", "cvc": "123", "exp": "12/30"}, "api_key": "k", "n": [1]}
    assert redacted(body) == {
        "card": {"number": REDACTED, "cvc": REDACTED, "exp": "12/30"},
        "api_key": REDACTED,
        "n": [1],
    }


async def test_a_held_request_s_summary_keeps_no_header_no_path_secret_no_body_secret(
    make_proxy: ProxyFactory,
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, **ALWAYS)
    body = orjson.dumps({"text": "hi", "password": "hunter2"})
    headers = {**KEY, "Content-Type": "application/json"}
    await client.post("/up/bot123456:SECRET/sendMessage", data=body, headers=headers)
    [held] = await store.list_approvals("default")
    summary = orjson.loads(held.summary)
    assert summary == {
        "method": "POST",
        "upstream": "up",
        "path": "/bot{token}/sendMessage",
        "body": {"text": "hi", "password": REDACTED},
    }
    for secret in ("SECRET", "hunter2", "sk_live_123"):
        assert secret not in held.summary


async def test_a_body_that_cannot_be_read_is_told_by_its_size(make_proxy: ProxyFactory) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, **ALWAYS)
    headers = {**KEY, "Content-Type": "application/octet-stream"}
    await client.post("/up/messages", data=b"\x00" * 9000, headers=headers)
    [held] = await store.list_approvals("default")
    assert orjson.loads(held.summary)["body"] == "(9000 bytes that are neither JSON nor a form)"


async def test_a_long_summary_is_cut_to_what_an_approval_keeps(make_proxy: ProxyFactory) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store=store, **ALWAYS)
    headers = {**KEY, "Content-Type": "application/json"}
    await client.post("/up/messages", data=orjson.dumps({"text": "x" * 9000}), headers=headers)
    [held] = await store.list_approvals("default")
    assert len(held.summary) == 4000
    assert held.summary.endswith("…")
