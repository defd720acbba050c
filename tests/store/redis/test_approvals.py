"""What only the Redis store's approvals have: every key of a step in the agent's slot, an
open approval kept without expiry and a settled one for its keep, and hashes decoded strictly."""

from __future__ import annotations

import fakeredis
import pytest
from redis.crc import key_slot

from idemproxy.store.approvals import ApprovalState, DecideRequest, HoldRequest
from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.journal import AuditEntry
from idemproxy.store.records import EffectMeta, RecordKey
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.approvals import decode_approval, step_keys
from idemproxy.store.redis.store import RedisStore

AGENT = "bot{x}:1"  # braces and a colon: the tag must still hold every key in one slot
REQUEST = HoldRequest(RecordKey(AGENT, "e1"), "fp", EffectMeta(), "rule", "summary", 60_000, 60_000)


def test_every_key_of_a_step_is_in_the_agents_slot() -> None:
    keys = [*step_keys(AGENT, REQUEST.approval_id), layout.audit_key(AGENT)]
    assert {key_slot(key.encode()) for key in keys} == {key_slot(layout.outbox_key(AGENT).encode())}


async def test_an_open_approval_never_expires_and_a_settled_one_for_its_keep() -> None:
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    store = RedisStore(client, listing_grace_s=0)
    try:
        approval = await store.hold(REQUEST)
        key = layout.approval_key(AGENT, approval.approval_id)
        assert await client.pttl(key) == -1
        assert await client.zrange(layout.approvals_key(AGENT), 0, -1) == [
            approval.approval_id.encode()
        ]
        audit = AuditEntry(agent=AGENT, action="approval.deny", actor="alice", target="a")
        denied = await store.decide(DecideRequest(AGENT, approval.approval_id, False, audit))
        assert denied is not None
        assert denied.state is ApprovalState.DENIED
        assert 0 < await client.pttl(key) <= 60_000
        assert await client.zrange(layout.approvals_key(AGENT), 0, -1) == []
    finally:
        await store.close()


def test_a_hash_missing_a_field_is_corrupt() -> None:
    with pytest.raises(StoreCorrupt, match="cannot be decoded"):
        decode_approval(AGENT, {b"state": b"approved"})
    with pytest.raises(StoreCorrupt):
        decode_approval(AGENT, [b"state", b"nonsense"])
