"""The listing of an agent's batches in the Redis store (store/batches.py).

The claim script scores each batch in ``idem:{A}:batches`` by when it started. A listing
checks that each batch it returns still has its set of effect ids (``idem:{A}:b:<batch>``, which
lives as long as the records an outcome gave a TTL) and drops those whose set is gone. A held
record (in flight or unknown) has no expiry and may outlive both, so the batches of the leases
and review indexes are listed too: a batch in doubt is never missing from its agent's listing.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.batches import MAX_LISTED_BATCHES, BatchStart, newest_first
from idemproxy.store.records import RecordKey
from idemproxy.store.redis.fields import RecordField
from idemproxy.store.redis.keys import batch_key, batches_key, leases_key, record_key, unknown_key

_HELD_FIELDS = (RecordField.BATCH, RecordField.CREATED_MS)


async def list_batches(client: Redis | RedisCluster, agent: str, limit: int) -> list[BatchStart]:
    """The agent's batches with a live record, newest first, at most ``limit``."""
    bound = max(min(limit, MAX_LISTED_BATCHES), 0)
    if bound == 0:
        return []
    starts = await _held_starts(client, agent)
    index = batches_key(agent)
    live = 0
    for first in range(0, MAX_LISTED_BATCHES, bound):
        page: Any = await client.zrevrange(index, first, first + bound - 1, withscores=True)
        if not page:
            break
        batches = [(member.decode(), int(score)) for member, score in page]
        async with client.pipeline(transaction=False) as pipe:
            for batch, _ in batches:
                pipe.exists(batch_key(agent, batch))
            found = await pipe.execute()
        gone = [b for (b, _), n in zip(batches, found, strict=True) if not n and b not in starts]
        if gone:
            await client.zrem(index, *gone)
        for (batch, started_ms), exists in zip(batches, found, strict=True):
            if exists or batch in starts:
                starts[batch] = min(started_ms, starts.get(batch, started_ms))
                live += 1
        if live >= bound or len(page) < bound:
            break
    return newest_first((BatchStart(b, ms) for b, ms in starts.items()), bound)


async def _held_starts(client: Redis | RedisCluster, agent: str) -> dict[str, int]:
    """The batches of the agent's held records (those in flight or unknown), each with the
    earliest ``created_ms`` of them."""
    async with client.pipeline(transaction=False) as pipe:
        pipe.zrange(leases_key(agent), 0, MAX_LISTED_BATCHES - 1)
        pipe.zrange(unknown_key(agent), 0, MAX_LISTED_BATCHES - 1)
        leased, unknown = await pipe.execute()
    ids = sorted(set(leased) | set(unknown))
    if not ids:
        return {}
    async with client.pipeline(transaction=False) as pipe:
        for effect_id in ids:
            pipe.hmget(record_key(RecordKey(agent, effect_id.decode())), _HELD_FIELDS)
        replies = await pipe.execute()
    starts: dict[str, int] = {}
    for batch_raw, created_raw in replies:
        if batch_raw and created_raw:
            batch, created_ms = batch_raw.decode(), int(created_raw)
            starts[batch] = min(created_ms, starts.get(batch, created_ms))
    return starts
