"""Ledger tests run on every store backend, through the store tests' fixtures."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from idemproxy.store.protocols import Store
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    EffectMeta,
    RecordKey,
    RecordState,
    Settlement,
    StoredResponse,
)
from tests.store.conftest import ns, store
from tests.support.controller import Controller

__all__ = ["SECRET", "controller", "make_effect", "ns", "store"]

SECRET = "test-secret-0123456789abcdef"  # the controller's, that deliveries are signed with


@pytest.fixture
async def controller() -> AsyncIterator[Controller]:
    """A recovery controller on a loopback port that accepts deliveries signed with SECRET."""
    controller = Controller(SECRET)
    await controller.start()
    yield controller
    await controller.stop()


async def make_effect(
    store: Store,
    agent: str,
    batch: str,
    tool_call: str,
    state: RecordState | None,
    *,
    status: int = 200,
    external_id: str = "",
    lease_ms: int = 30_000,
    ttl_s: int = 86_400,
) -> RecordKey:
    """A record of one tool call's effect, claimed and (unless ``state`` is None) settled."""
    key = RecordKey(agent, f"tc:{batch}:{tool_call}:d-0")
    meta = EffectMeta(batch, tool_call, "post_message", "discord", "POST", "/channels/1/messages")
    claim = await store.claim(ClaimRequest(key, "fp", meta, lease_ms, 600))
    assert isinstance(claim, Claimed)
    if state is not None:
        response = None
        if state is RecordState.COMPLETED:
            response = StoredResponse(status, (("content-type", "application/json"),), b"{}")
        reason = "" if response else "no answer"
        settlement = Settlement(
            state, response, external_id=external_id, reason=reason, ttl_s=ttl_s
        )
        assert await store.settle(key, claim.fence, settlement)
    return key
