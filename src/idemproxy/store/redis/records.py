"""The records of the Redis store: claim, settle, resolve, renew and the reads of records.

A claim, a settle and a renew are one round trip each; a claim that finds a completed record
returns it, body included, in that same round trip. Those go over one pipelined connection
where the URL allows (:mod:`.pipeline`). With ``wait_replicas`` in the URL a claim also waits
for replicas to have it (:mod:`.replicas`), on the claim's connection and in its round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.batches import LISTING_RETENTION_S, MAX_LISTED_BATCHES
from idemproxy.store.clock import wall_ms
from idemproxy.store.decisions import EXPIRED_LEASE_REASON
from idemproxy.store.records import (
    ClaimRequest,
    ClaimResult,
    EffectRecord,
    RecordKey,
    Refused,
    Resolved,
    ResolveRequest,
    ResolveResult,
    Settlement,
)
from idemproxy.store.redis import lua
from idemproxy.store.redis.agents import RedisAgents
from idemproxy.store.redis.argv import (
    ClaimArgs,
    FetchBatchArgs,
    FetchUnknownArgs,
    RenewArgs,
    ResolveArgs,
    ScriptArg,
    SettleArgs,
    SweepArgs,
)
from idemproxy.store.redis.codec import decode_claim, decode_record, response_args
from idemproxy.store.redis.control import control_keys, streak_args
from idemproxy.store.redis.errors import translated
from idemproxy.store.redis.journal import audit_args
from idemproxy.store.redis.keys import (
    MARKER_KEY,
    audit_key,
    batch_key,
    claim_keys,
    cursor_key,
    fence_key,
    leases_key,
    outbox_key,
    record_key,
    state_keys,
    unknown_key,
)
from idemproxy.store.redis.pipeline import PipelinedRedis, hot_script
from idemproxy.store.redis.replicas import ReplicaWait
from idemproxy.store.redis.wait import WaitedScript, waited_script


class RedisRecords:
    """The record operations of :class:`~idemproxy.store.redis.store.RedisStore`, and the
    connections every part shares: this part pings, tells the time and closes them."""

    backend = "redis"

    def __init__(
        self,
        client: Redis | RedisCluster,
        agents: RedisAgents,
        *,
        retention_ms: int,
        pipeline: PipelinedRedis | None = None,
        replica_wait: ReplicaWait | None = None,
        extra_clients: Sequence[Redis] = (),
    ) -> None:
        """``agents`` lists each agent before its claim; ``retention_ms`` is the outbox's."""
        self._client = client
        self._extra_clients = tuple(extra_clients)
        self._agents = agents
        self._pipeline = pipeline
        self._retention_ms = retention_ms
        self._replica_wait = replica_wait
        # The marker's epoch as the last check saw it; '' claims without comparing.
        self.expected_epoch = ""
        self._claim = hot_script(client, pipeline, lua.CLAIM.source)
        self._waited_claim: WaitedScript | None = None
        if replica_wait is not None:
            self._waited_claim = waited_script(client, pipeline, lua.CLAIM.source, replica_wait)
        self._settle = hot_script(client, pipeline, lua.SETTLE.source)
        self._renew = hot_script(client, pipeline, lua.RENEW.source)
        self._resolve = hot_script(client, pipeline, lua.RESOLVE.source)
        self._fetch_unknown = client.register_script(lua.FETCH_UNKNOWN.source)
        self._fetch_batch = client.register_script(lua.FETCH_BATCH.source)
        self._sweep = client.register_script(lua.SWEEP.source)

    async def ping(self) -> None:
        with translated("ping"):
            await self._client.ping()
            if self._pipeline is not None:
                await self._pipeline.execute("PING")

    async def now_ms(self) -> int:
        reply: Any
        with translated("now_ms"):
            reply = await self._client.time()
        seconds, micros = reply
        return int(seconds) * 1000 + int(micros) // 1000

    async def close(self) -> None:
        with translated("close"):
            await self._client.aclose()
            for client in self._extra_clients:
                await client.aclose()
            if self._pipeline is not None:
                await self._pipeline.close()

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        key, meta = request.key, request.meta
        keys = claim_keys(key, meta.batch)
        epoch = self.expected_epoch
        if epoch:
            keys.append(MARKER_KEY)
        args = lua.CLAIM.argv(
            ClaimArgs(
                effect_id=key.effect_id,
                fingerprint=request.fingerprint,
                lease_ms=request.lease_ms,
                ttl_ms=request.ttl_s * 1000,
                batch=meta.batch,
                tool_call=meta.tool_call,
                action=meta.action,
                upstream=meta.upstream,
                method=meta.method,
                path=meta.path,
                retention_ms=self._retention_ms,
                lapse_reason=EXPIRED_LEASE_REASON,
                ignore_pause=request.ignore_pause,
                reworded_may_reclaim=request.reworded_may_reclaim,
                epoch=epoch,
                batches_kept=MAX_LISTED_BATCHES,
                batches_retention_ms=LISTING_RETENTION_S * 1000,
            )
        )
        waited: object = None
        with translated("claim"):
            # Listed first: an agent must be on the worklists by the time it has a record to sweep.
            waited_claim = self._waited_claim
            if waited_claim is None:
                reply = await self._agents.listed(
                    key.agent, lambda: self._claim(keys=keys, args=args)
                )
            else:
                reply, waited = await self._agents.listed(
                    key.agent, lambda: waited_claim(keys, args)
                )
        wait = self._replica_wait
        # Only a claim that takes the key needs its replicas: any other sends nothing.
        return decode_claim(key, reply, lambda: None if wait is None else wait.shortfall(waited))

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        args = lua.SETTLE.argv(
            SettleArgs(
                effect_id=key.effect_id,
                fence=fence,
                state=settlement.state.value,
                event_type=settlement.event_type().value,
                ttl_ms=settlement.ttl_s * 1000,
                retention_ms=self._retention_ms,
                external_id=settlement.external_id,
                reason=settlement.reason,
                response=response_args(settlement.response),
                streak=streak_args(
                    settlement.pause_after_failures, settlement.failure(), key.agent
                ),
            )
        )
        keys = [*state_keys(key), *control_keys(key.agent), audit_key(key.agent)]
        keys.append(cursor_key(key.agent))
        with translated("settle"):
            return int(await self._settle(keys=keys, args=args)) == 1

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        key, expected, resolution = request.key, request.expected, request.resolution
        audit, fence = request.audit, request.fence
        args = lua.RESOLVE.argv(
            ResolveArgs(
                effect_id=key.effect_id,
                expected_state=expected.value,
                state=resolution.state.value,
                ttl_ms=resolution.ttl_s * 1000,
                retention_ms=self._retention_ms,
                external_id=resolution.external_id,
                reason=resolution.reason,
                response=response_args(resolution.response),
                has_audit=audit is not None,
                audit=audit_args(audit),
                expected_fence=fence,
            )
        )
        keys = [
            *state_keys(key),
            audit_key(key.agent),
            fence_key(key.agent),
            cursor_key(key.agent),
        ]
        with translated("resolve"):
            reply = await self._resolve(keys=keys, args=args)
        record = decode_record(key, reply[1]) if reply[1] else None
        if int(reply[0]) == 1 and record is not None:
            return Resolved(record)
        return Refused(record)

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        with translated("renew"):
            reply = await self._renew(
                keys=[record_key(key), leases_key(key.agent)],
                args=lua.RENEW.argv(RenewArgs(fence, lease_ms, key.effect_id)),
            )
        return int(reply) == 1

    async def get(self, key: RecordKey) -> EffectRecord | None:
        fields: Any  # bytes throughout: the client is built with decode_responses=False
        with translated("get"):
            if self._pipeline is None:
                fields = await self._client.hgetall(record_key(key))
            else:
                fields = await self._pipeline.execute("HGETALL", record_key(key))
        return decode_record(key, fields) if fields else None

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        index = unknown_key(agent)
        found: list[EffectRecord] = []
        start = 0
        ids: Any
        with translated("list_unknown"):
            while len(found) < limit:
                # Stale entries are dropped by the fetch, so later pages shift down.
                ids = await self._client.zrange(index, start, start + limit - len(found) - 1)
                if not ids:
                    break
                args = lua.FETCH_UNKNOWN.argv(FetchUnknownArgs(tuple(ids)))
                live = await self._fetch(self._fetch_unknown, index, agent, ids, args)
                found += [decode_record(RecordKey(agent, i.decode()), r) for i, r in live]
                start += len(live)
        return found

    async def batch_records(self, agent: str, batch: str) -> list[EffectRecord]:
        """The batch set lives as long as the records an outcome gave a TTL; a held record (in
        flight or unknown) may outlive it, so those come from the leases and review indexes."""
        index = batch_key(agent, batch)
        listed: Any
        held: Any
        with translated("batch_records"):
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.smembers(index)
                pipe.zrange(leases_key(agent), 0, -1)
                pipe.zrange(unknown_key(agent), 0, -1)
                listed, *held = await pipe.execute()
            ids = sorted(set(listed).union(*held))
            args = lua.FETCH_BATCH.argv(FetchBatchArgs(tuple(ids)))
            replies = await self._fetch(self._fetch_batch, index, agent, ids, args) if ids else []
        records = [decode_record(RecordKey(agent, i.decode()), r) for i, r in replies if r]
        records.sort(key=lambda record: record.created_ms)
        return records

    async def _fetch(
        self, script: Any, index: str, agent: str, ids: Sequence[bytes], args: list[ScriptArg]
    ) -> list[tuple[bytes, Any]]:
        """The live records listed in ``index`` under ``ids``; the script drops stale entries."""
        keys = [index] + [record_key(RecordKey(agent, i.decode())) for i in ids]
        replies = await script(keys=keys, args=args)
        return [(i, reply) for i, reply in zip(ids, replies, strict=True) if reply]

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        """Candidates come from the leases index by this host's clock; the script decides by
        Redis's, so a skewed host clock delays a sweep but never lapses a live lease."""
        if limit <= 0:
            return []
        leases = leases_key(agent)
        ids: Any
        with translated("sweep_expired"):
            ids = await self._client.zrangebyscore(leases, "-inf", wall_ms(), start=0, num=limit)
            if not ids:
                return []
            keys = [leases, outbox_key(agent), unknown_key(agent), cursor_key(agent)]
            keys += [record_key(RecordKey(agent, i.decode())) for i in ids]
            args = lua.SWEEP.argv(SweepArgs(self._retention_ms, EXPIRED_LEASE_REASON, tuple(ids)))
            lapsed = await self._sweep(keys=keys, args=args)
        return [decode_record(RecordKey(agent, i.decode()), fields) for i, fields in lapsed]
