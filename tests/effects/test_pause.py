"""An agent whose effects keep failing is paused: it stops acting instead of looping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from idemproxy.effects.seal import SEAL_HEADER
from idemproxy.proxy.state import ProxyState
from idemproxy.store.control import Pause, PauseOrigin, PauseRequest
from idemproxy.store.journal import AuditEntry
from idemproxy.store.memory import MemoryStore
from tests.proxy.conftest import ProxyFactory
from tests.support.upstream import EffectLog

Client = TestClient[web.Request, web.Application]
AGENT = "support-bot"
BODY = b'{"n": 1}'
REASON = "auto-paused after 5 consecutive failures. Last error: upstream answered 401"

POLICY = """
name: test
routes:
  - {name: read, match: {methods: [GET]}, effect: safe}
  - {name: unkeyed, match: {methods: [POST], path: "/free/{rest*}"}, on_missing_key: passthrough}
default: {name: write}
"""


@pytest.fixture
def policy(tmp_path: Path) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return str(path)


async def post(
    client: Client, path: str, tool_call: str, **headers: str
) -> tuple[int, dict[str, Any], Any]:
    sent = {"Idem-Agent": AGENT, "Idem-Batch": "b1", "Idem-Tool-Call": tool_call, **headers}
    async with client.post(f"/up/{path}", data=BODY, headers=sent) as answer:
        body = await answer.json(content_type=None)
        return answer.status, dict(answer.headers), body


async def fail(client: Client, count: int, first: int = 0) -> None:
    for index in range(first, first + count):
        status, _, _ = await post(client, "status/401", f"fail-{index}")
        assert status == 401


async def test_five_failures_pause_the_agent_and_nothing_more_is_forwarded(
    make_proxy: ProxyFactory, effects: EffectLog, policy: str
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store, policy=policy)
    assert (await post(client, "messages", "earlier"))[0] == 200

    await fail(client, 5)
    sent = len(effects.effects)

    status, headers, problem = await post(client, "messages", "next")
    assert status == 503
    assert headers["Content-Type"] == "application/problem+json"
    assert (headers["Idem-Outcome"], headers["x-should-retry"]) == ("agent-paused", "false")
    assert problem["type"].endswith("/agent-paused")
    assert (problem["reason"], problem["paused_by"]) == (REASON, "auto")
    assert f"idemproxy agent resume {AGENT}" in problem["detail"]
    status, _, _ = await post(client, "free/x", "unkeyed")  # claims nothing: the gate holds it
    assert status == 503
    assert len(effects.effects) == sent

    # What completed still replays, and reads still pass.
    status, headers, _ = await post(client, "messages", "earlier")
    assert (status, headers["Idem-Outcome"]) == (200, "replayed")
    async with client.get("/up/headers") as read:
        assert read.status == 200
    control = await store.read_control(AGENT)
    assert control.pause is not None
    assert len(control.snapshot) == 5


async def test_a_success_ends_the_streak(
    make_proxy: ProxyFactory, effects: EffectLog, policy: str
) -> None:
    client, _ = await make_proxy(policy=policy)
    await fail(client, 4)
    assert (await post(client, "messages", "ok"))[0] == 200
    await fail(client, 4, first=4)

    assert (await post(client, "messages", "still-running"))[0] == 200


async def test_unknown_and_unsent_outcomes_count_as_failures(
    make_proxy: ProxyFactory, policy: str
) -> None:
    client, _ = await make_proxy(policy=policy, **{"recovery.pause_after_failures": 2})
    assert (await post(client, "drop", "lost"))[0] == 502  # sent, no answer: unknown
    assert (await post(client, "status/429", "limited"))[0] == 429  # not applied

    status, _, problem = await post(client, "messages", "next")
    assert status == 503
    assert problem["reason"].startswith("auto-paused after 2 consecutive failures.")


async def test_a_threshold_of_zero_never_pauses(make_proxy: ProxyFactory, policy: str) -> None:
    client, _ = await make_proxy(policy=policy, **{"recovery.pause_after_failures": 0})
    await fail(client, 8)
    assert (await post(client, "messages", "next"))[0] == 200


def sealed(state: ProxyState, path: str, compensates: str, body: bytes = BODY) -> dict[str, str]:
    """The headers the proxy's own compensation sender adds (admin/sender.py)."""
    seal = state.seal.sign("POST", f"/up/{path}", compensates, body)
    return {"Idem-Compensates": compensates, SEAL_HEADER: seal}


async def paused_by_alice(store: MemoryStore) -> None:
    pause = Pause(PauseOrigin.OPERATOR, "rotating the bot token", "alice")
    audit = AuditEntry(agent=AGENT, action="agent.pause", actor="alice", target=AGENT)
    assert await store.write_pause(PauseRequest(AGENT, 0, pause, audit)) is not None


async def test_an_operators_pause_holds_every_effect_and_a_compensation_passes(
    make_proxy: ProxyFactory, effects: EffectLog, policy: str
) -> None:
    store = MemoryStore()
    client, state = await make_proxy(store, policy=policy)
    await paused_by_alice(store)

    status, _, problem = await post(client, "messages", "next")
    assert (status, problem["paused_by"]) == (503, "operator")
    assert "paused by alice (rotating the bot token)" in problem["detail"]
    assert effects.effects == []

    status, headers, _ = await post(
        client, "status/404", "compensate", **sealed(state, "status/404", f"{AGENT}/tc:b1:x")
    )
    assert (status, headers["Idem-Outcome"]) == (404, "forwarded")
    sent = {name.lower() for name in effects.effects[0].headers}
    assert "idem-compensates" not in sent
    assert SEAL_HEADER.lower() not in sent  # the seal never leaves the proxy
    assert (await store.read_control(AGENT)).streak == ()  # an operator's failure is not counted


@pytest.mark.parametrize(
    "forged",
    [
        {"Idem-Compensates": f"{AGENT}/tc:b1:x"},
        {"Idem-Compensates": f"{AGENT}/tc:b1:x", SEAL_HEADER: "0" * 64},
        {"Idem-Compensates": f"{AGENT}/tc:b1:x", SEAL_HEADER: ""},
    ],
    ids=["no-seal", "made-up-seal", "empty-seal"],
)
async def test_a_forged_compensation_is_refused_while_paused_and_sends_nothing(
    make_proxy: ProxyFactory, effects: EffectLog, policy: str, forged: dict[str, str]
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store, policy=policy)
    await paused_by_alice(store)

    status, headers, problem = await post(client, "status/404", "compensate", **forged)

    assert (status, headers["Idem-Outcome"]) == (403, "forged-compensation")
    assert headers["x-should-retry"] == "false"
    assert "Idem-Compensates" in problem["detail"]
    assert "--strategy compensate" in problem["detail"]
    assert effects.effects == []
    assert (await store.read_control(AGENT)).pause is not None


async def test_a_seal_holds_for_its_own_request_alone(
    make_proxy: ProxyFactory, effects: EffectLog, policy: str
) -> None:
    """A seal an agent saw (it never does) would not let it send anything else past a pause:
    it covers the method, path, body and compensated key of one compensation."""
    store = MemoryStore()
    client, state = await make_proxy(store, policy=policy)
    await paused_by_alice(store)
    genuine = sealed(state, "status/404", f"{AGENT}/tc:b1:x")

    other_path = await post(client, "messages", "compensate", **genuine)
    other_key = await post(
        client, "status/404", "compensate", **{**genuine, "Idem-Compensates": f"{AGENT}/tc:b1:y"}
    )
    other_body = sealed(state, "status/404", f"{AGENT}/tc:b1:x", body=b'{"n": 2}')
    other_proxy = await make_proxy(store, policy=policy)
    elsewhere = await post(other_proxy[0], "status/404", "compensate", **genuine)

    for status, headers, _ in (other_path, other_key, elsewhere):
        assert (status, headers["Idem-Outcome"]) == (403, "forged-compensation")
    assert (await post(client, "status/404", "compensate", **other_body))[0] == 403
    assert effects.effects == []


async def test_a_forged_compensation_is_refused_when_not_paused_too(
    make_proxy: ProxyFactory, effects: EffectLog, policy: str
) -> None:
    store = MemoryStore()
    client, _ = await make_proxy(store, policy=policy)

    status, _, _ = await post(client, "status/401", "c1", **{"Idem-Compensates": "x"})

    assert status == 403
    assert effects.effects == []
    assert (await store.read_control(AGENT)).streak == ()
