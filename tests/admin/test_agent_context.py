"""The agent's window on the proxy listener: its own batches' recovery context, no token, no
other agent's, nothing to a web page, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from idemproxy.admin.agent_context import CONTEXT_PATH, PREFIX, build_agent_app
from idemproxy.config.loader import load_config
from idemproxy.config.settings import ProxyConfig
from idemproxy.errors import ConfigError
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordState
from tests.ledger.conftest import make_effect

Client = TestClient[web.Request, web.Application]


def config(**settings: Any) -> ProxyConfig:
    return load_config(environ={}, flags={"admin_token": "t" * 20, **settings}).config


async def served(aiohttp_client: Any, store: MemoryStore, **settings: Any) -> Client:
    """The window mounted as the proxy mounts it, at its prefix."""
    app = web.Application()
    app.add_subapp(PREFIX, build_agent_app(config(**settings), store))
    client: Client = await aiohttp_client(app)
    return client


def path(batch: str) -> str:
    return CONTEXT_PATH.format(batch=batch)


async def test_the_sidecars_agent_reads_its_batch_without_a_token(aiohttp_client: Any) -> None:
    store = MemoryStore()
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED, external_id="m-1")
    await make_effect(store, "bot", "b1", "c2", RecordState.UNKNOWN)
    client = await served(aiohttp_client, store, agent_id="bot")
    answer = await client.get(path("b1"))
    assert answer.status == 200
    assert answer.headers["Cache-Control"] == "no-store"
    assert "Access-Control-Allow-Origin" not in answer.headers
    document = await answer.json()
    assert (document["agent"], document["batch"], document["strategy"]) == (
        "bot",
        "b1",
        "manual_only",
    )
    assert [a["tool_call"] for a in document["completed"]] == ["c1"]
    assert [a["tool_call"] for a in document["unknown"]] == ["c2"]
    assert document["text"].startswith("Recovery context of batch b1")
    assert set(document["completed"][0]) == {
        "tool_call", "action", "upstream", "method", "path", "status", "external_id",
        "summary", "retryable",
    }  # fmt: skip


async def test_a_pinned_sidecar_refuses_another_agents_batch(aiohttp_client: Any) -> None:
    store = MemoryStore()
    await make_effect(store, "other", "b1", "c1", RecordState.COMPLETED)
    client = await served(aiohttp_client, store, agent_id="bot", allow_agent_header=False)
    answer = await client.get(path("b1"), headers={"Idem-Agent": "other"})
    assert answer.status == 400
    body = await answer.text()
    assert "pinned to agent 'bot'" in body
    assert "c1" not in body
    assert (await client.get(path("b1"))).status == 404  # bot has no batch b1


async def test_where_agents_name_themselves_the_named_one_is_read(aiohttp_client: Any) -> None:
    store = MemoryStore()
    await make_effect(store, "other", "b1", "c1", RecordState.COMPLETED)
    client = await served(aiohttp_client, store, agent_id="bot")
    answer = await client.get(path("b1"), headers={"Idem-Agent": "other"})
    assert answer.status == 200
    assert (await answer.json())["agent"] == "other"


@pytest.mark.parametrize(
    "forged",
    [
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Host": "evil.example:8080"},
    ],
)
async def test_a_web_page_reads_nothing(aiohttp_client: Any, forged: dict[str, str]) -> None:
    store = MemoryStore()
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED)
    client = await served(aiohttp_client, store, agent_id="bot")
    answer = await client.get(path("b1"), headers=forged)
    assert answer.status == 403
    refusal = await answer.text()
    assert "c1" not in refusal
    # Said in terms of what was asked: the agent's window, not the admin API it is not.
    assert "the recovery context" in refusal
    assert "admin API" not in refusal


async def test_nothing_else_is_served_and_nothing_is_changed(aiohttp_client: Any) -> None:
    store = MemoryStore()
    await make_effect(store, "bot", "b1", "c1", RecordState.UNKNOWN)
    client = await served(aiohttp_client, store, agent_id="bot")
    assert (await client.post(path("b1"), json={})).status == 405
    assert (await client.get(f"{PREFIX}/v1/review")).status == 404
    assert (await client.get(f"{PREFIX}/v1/agents/bot/batches")).status == 404


def test_no_upstream_can_take_the_prefix() -> None:
    """The proxy routes /<upstream>/...: its own prefix must be one config refuses."""
    with pytest.raises(ConfigError, match="upstreams"):
        config(upstreams={PREFIX.strip("/"): {"url": "http://127.0.0.1:1"}})
    assert config(upstreams={"idemproxy": {"url": "http://127.0.0.1:1"}}).upstreams
