"""The agent's recovery context end to end: a batch with two completed effects and one in doubt,
read back by the agent over the proxy listener through ``idemproxy.agent.recovery_context``,
with no admin token, and by nobody else.

Real processes: the fake upstream and ``idemproxy serve`` on SQLite, pinned to one agent and
with an admin token set (which the agent never needs).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import httpx
import orjson
import pytest

from idemproxy import agent
from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT_ID = "ctx-agent"
BATCH = "batch-ctx-1"
TOKEN = "admin-token-0123456789abcdef"
CONTEXT = f"/_idemproxy/v1/batches/{BATCH}/context"


def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text("name: ctx\ndefault: {name: post_message, external_id: /id}\n")
    return path


def pinned_proxy(tmp_path: Path, upstream: FakeUpstream) -> ServedProxy:
    env = {"IDEMPROXY_ADMIN_TOKEN": TOKEN, "IDEMPROXY_ALLOW_AGENT_HEADER": "false"}
    return ServedProxy(
        tmp_path,
        "--upstream", f"up={upstream.url}",
        "--policy", f"up={policy_file(tmp_path)}",
        "--store", f"sqlite:///{tmp_path}/effects.db",
        "--agent-id", AGENT_ID,
        env=env,
    )  # fmt: skip


def run_batch(proxy: ServedProxy, batch: str = BATCH) -> None:
    """Two messages sent, then a call whose connection is cut after it left: unknown."""
    with httpx.Client(base_url=proxy.url, timeout=10) as client:
        for call in ("call-1", "call-2"):
            sent = client.post(
                "/up/api/channels/1/messages",
                json={"content": f"secret text of {call}"},
                headers={"Idem-Batch": batch, "Idem-Tool-Call": call},
            )
            assert sent.status_code == 200, sent.text
        doubt = client.post(
            "/up/drop", json={"amount": 1}, headers={"Idem-Batch": batch, "Idem-Tool-Call": "pay"}
        )
        assert doubt.status_code >= 500, doubt.text


def raw_get(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def test_the_agent_reads_what_its_batch_did_and_nobody_else_does(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    proxy = pinned_proxy(tmp_path, upstream)
    with running(proxy):
        run_batch(proxy)

        context = agent.recovery_context(BATCH, base_url=proxy.url)

        assert context is not None
        assert (context.agent, context.batch, context.strategy) == (AGENT_ID, BATCH, "manual_only")
        assert [a["tool_call"] for a in context.completed] == ["call-1", "call-2"]
        assert [a["external_id"] for a in context.completed] == ["1", "2"]
        assert context.completed[0]["summary"] == (
            "POST up /api/channels/1/messages answered 200, external id 1"
        )
        assert [a["tool_call"] for a in context.unknown] == ["pay"]
        assert (context.failed, context.pending) == ((), ())
        assert "Already done (do not do these again" in context.text
        assert "- tool call pay (post_message): POST up /drop: outcome unknown" in context.text
        assert context.text.endswith("do not retry them or try to do them another way.")
        assert "secret text" not in context.text + repr(context)

        # A batch the proxy never saw: nothing to tell, a first run.
        assert agent.recovery_context("never-ran", base_url=proxy.url) is None

        # A pinned sidecar serves its own agent only, header or not.
        with pytest.raises(agent.RecoveryContextError, match="pinned to agent 'ctx-agent'"):
            agent.recovery_context(BATCH, base_url=proxy.url, agent="another-agent")

        # A web page on the same host cannot read it, by its origin or by DNS rebinding.
        url = proxy.url + CONTEXT
        for forged in (
            {"Origin": "http://evil.example"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Host": "evil.example"},
        ):
            status, body = raw_get(url, forged)
            assert status == 403, (forged, body)
            assert b"call-1" not in body
            assert "Access-Control-Allow-Origin" not in body.decode()
        status, body = raw_get(url, {})
        assert status == 200
        assert orjson.loads(body)["batch"] == BATCH

        # Nothing else of the store is served there, and the upstreams are as they were.
        status, _ = raw_get(proxy.url + "/_idemproxy/v1/status", {})
        assert status == 404
        assert len(upstream.effects("/messages")) == 2


def test_a_sidecar_that_lets_agents_name_themselves_reads_the_named_one(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    proxy = ServedProxy.for_upstream(
        tmp_path, upstream.url, policy_file(tmp_path), f"sqlite:///{tmp_path}/effects.db"
    )
    with running(proxy):
        hooks = {"request": [agent.httpx_hook]}
        with agent.batch(BATCH, agent="named-agent"):
            with agent.tool_call("call-1"), httpx.Client(event_hooks=hooks) as client:
                sent = client.post(f"{proxy.url}/up/api/channels/1/messages", json={})
                assert sent.status_code == 200
            context = agent.recovery_context(BATCH, base_url=proxy.url)
        assert context is not None
        assert context.agent == "named-agent"
        assert context.strategy == "selective"
        # The sidecar's own agent (default) has no such batch.
        assert agent.recovery_context(BATCH, base_url=proxy.url) is None
