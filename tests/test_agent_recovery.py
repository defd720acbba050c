"""``agent.recovery_context``: the agent's own client of its recovery context, standard library
only, against the proxy's window (admin/agent_context.py) served in process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from idemproxy import agent
from idemproxy.admin.agent_context import PREFIX, build_agent_app
from idemproxy.config.loader import load_config
from idemproxy.store.memory import MemoryStore
from idemproxy.store.records import RecordState
from tests.ledger.conftest import make_effect


@pytest.fixture(params=[True])
async def proxy_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """The window of a sidecar of agent ``bot`` that lets agents name themselves (the param)."""
    store = MemoryStore()
    await make_effect(store, "bot", "b1", "c1", RecordState.COMPLETED, external_id="m-1")
    await make_effect(store, "named", "b2", "c1", RecordState.UNKNOWN)
    flags = {"agent_id": "bot", "allow_agent_header": request.param}
    config = load_config(environ={}, flags=flags).config
    app = web.Application()
    app.add_subapp(PREFIX, build_agent_app(config, store))
    server = TestServer(app)
    await server.start_server()
    yield str(server.make_url("")).rstrip("/")
    await server.close()


async def test_it_reads_the_batch_of_the_sidecars_agent(proxy_url: str) -> None:
    context = await agent.recovery_context_async("b1", base_url=proxy_url)
    assert context is not None
    assert (context.agent, context.batch, context.strategy) == ("bot", "b1", "selective")
    assert context.completed[0]["external_id"] == "m-1"
    assert context.advice.startswith("run the batch again with the same batch")
    assert context.text.startswith("Recovery context of batch b1")


async def test_it_names_the_agent_of_the_current_batch(proxy_url: str) -> None:
    with agent.batch("b2", agent="named"):
        context = await agent.recovery_context_async("b2", base_url=proxy_url)
    assert context is not None
    assert context.agent == "named"
    assert [a["tool_call"] for a in context.unknown] == ["c1"]


async def test_a_batch_the_proxy_never_saw_has_no_context(
    proxy_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(agent.PROXY_URL_VARIABLE, proxy_url)
    assert await agent.recovery_context_async("never-ran") is None


@pytest.mark.parametrize("proxy_url", [False], indirect=True)
async def test_a_refusal_and_an_absent_proxy_say_what_to_do(proxy_url: str) -> None:
    with pytest.raises(agent.RecoveryContextError, match="refused: this sidecar is pinned"):
        await agent.recovery_context_async("b2", base_url=proxy_url, agent="named")
    with pytest.raises(agent.RecoveryContextError, match="is it running"):
        await agent.recovery_context_async("b1", base_url="http://127.0.0.1:9")
    with pytest.raises(agent.RecoveryContextError, match="not an http"):
        agent.recovery_context("b1", base_url="file:///etc")
    with pytest.raises(ValueError, match="visible ASCII"):
        agent.recovery_context("two words", base_url=proxy_url)


def test_importing_the_agent_module_loads_no_http_client() -> None:
    code = "import sys, idemproxy.agent; print('urllib.request' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
