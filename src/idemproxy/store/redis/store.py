"""Redis backend: one Lua script per state change, keys laid out in :mod:`.keys`.

A claim, a settle and a renew are one round trip each; a claim that finds a completed record
returns it, body included, in that same round trip. Those calls of the hot path go over one
pipelined connection where the URL allows (:mod:`.pipeline`), everything else through
redis-py. With ``wait_replicas`` in the URL a claim also waits for replicas to have it
(:mod:`.replicas`), on the claim's connection and in its round trip. Connections are opened
lazily, time out fast (a dead Redis is reported in a second or two, not after a long retry
loop) and come back by themselves when Redis does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.base import InvalidStoreURL, StoreCorrupt, StoreUnavailable
from idemproxy.store.clock import wall_ms
from idemproxy.store.headers import dump_headers, load_headers
from idemproxy.store.journal import AuditEntry
from idemproxy.store.records import (
    ClaimRequest,
    ClaimResult,
    EffectEvent,
    EffectMeta,
    EffectRecord,
    EventType,
    RecordKey,
    RecordState,
    Resolution,
    ResolveResult,
    Settlement,
    StoredResponse,
)
from idemproxy.store.redis import client as redis_client
from idemproxy.store.redis import durability as redis_durability
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis import lua, replicas
from idemproxy.store.redis.agents import LISTING_GRACE_S, REGISTRY_CAP, RedisAgents
from idemproxy.store.redis.argv import (
    NO_RESPONSE,
    ClaimArgs,
    FetchBatchArgs,
    FetchUnknownArgs,
    RenewArgs,
    ResolveArgs,
    ResponseArgs,
    ScriptArg,
    SettleArgs,
    SweepArgs,
)
from idemproxy.store.redis.control import RedisControl, control_keys, decode_pause, streak_args
from idemproxy.store.redis.errors import translated as _translated
from idemproxy.store.redis.journal import STREAM_ID, audit_args
from idemproxy.store.redis.keys import EventField, RecordField
from idemproxy.store.redis.pipeline import PipelinedRedis, PipelinedScript
from idemproxy.store.redis.replicas import ReplicaWait
from idemproxy.store.redis.safety import RedisMarker
from idemproxy.store.redis.wait import WaitedScript, waited_script
from idemproxy.store.retention import EVENT_RETENTION_S
from idemproxy.store.safety import Durability, Loss, LossKind, Marker, MarkerCheck

EXPIRED_LEASE_REASON = "lease expired: the proxy holding this request stopped"

RedisClient = Redis | RedisCluster


class Script(Protocol):
    """A registered Lua script: redis-py's ``AsyncScript`` or a :class:`PipelinedScript`."""

    def __call__(self, keys: Sequence[str], args: Sequence[ScriptArg]) -> Awaitable[Any]: ...


class RedisStore(RedisControl):
    """The :class:`~idemproxy.store.base.Store` on Redis: single node, Sentinel or Cluster.

    Event ids are stream ids (``<ms>-<seq>``): ordered by the stream, opaque to callers. Events
    are kept ``event_retention_s``; the outbox stream of an agent quiet that long expires.
    """

    backend = "redis"

    def __init__(
        self,
        client: RedisClient,
        *,
        event_retention_s: int = EVENT_RETENTION_S,
        extra_clients: Sequence[Redis] = (),
        pipeline: PipelinedRedis | None = None,
        replica_wait: ReplicaWait | None = None,
        listing_grace_s: float = LISTING_GRACE_S,
        registry_cap: int = REGISTRY_CAP,
    ) -> None:
        """Use ``client`` (built with ``decode_responses=False``); the store closes it.

        With ``pipeline`` (to the same server) claims, settles, renewals, resolutions and record
        reads go over it instead. With ``replica_wait`` each claim waits for replicas to have it.
        ``listing_grace_s`` and ``registry_cap``: see :mod:`.agents`.
        """
        self._client = client
        self._extra_clients = tuple(extra_clients)
        self._pipeline = pipeline
        self._retention_ms = event_retention_s * 1000
        self._claim = self._hot_script(lua.CLAIM.source)
        self._replica_wait = replica_wait
        self._waited_claim: WaitedScript | None = None
        if replica_wait is not None:
            self._waited_claim = waited_script(client, pipeline, lua.CLAIM.source, replica_wait)
        self._settle = self._hot_script(lua.SETTLE.source)
        self._renew = self._hot_script(lua.RENEW.source)
        self._resolve = self._hot_script(lua.RESOLVE.source)
        self._fetch_unknown = client.register_script(lua.FETCH_UNKNOWN.source)
        self._fetch_batch = client.register_script(lua.FETCH_BATCH.source)
        self._sweep = client.register_script(lua.SWEEP.source)
        self._marker = RedisMarker(client)
        self._expected_epoch = ""  # the marker's, as the last check saw it: see expect_marker
        agents = RedisAgents(
            client, pipeline=pipeline, listing_grace_s=listing_grace_s, registry_cap=registry_cap
        )
        super().__init__(client, self._retention_ms, agents)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        event_retention_s: int = EVENT_RETENTION_S,
        listing_grace_s: float = LISTING_GRACE_S,
    ) -> RedisStore:
        """Build from ``redis://``, ``rediss://``, ``redis+sentinel://`` or ``redis+cluster://``.

        Nothing is connected yet: a Redis that is down now is found out by the first call.
        The ``wait_*`` query parameters are the store's (:mod:`.replicas`); any other is
        redis-py's.
        """
        try:
            rest, wait = replicas.split_wait(url)
            clients = redis_client.clients_from_url(rest)
        except ValueError as exc:
            raise InvalidStoreURL(f"cannot use redis URL {url!r}: {exc}") from exc
        return cls(
            clients.client,
            event_retention_s=event_retention_s,
            extra_clients=clients.helpers,
            pipeline=clients.pipeline,
            replica_wait=wait,
            listing_grace_s=listing_grace_s,
        )

    def _hot_script(self, source: str) -> Script:
        if self._pipeline is None:
            return self._client.register_script(source)
        return PipelinedScript(self._pipeline, source)

    async def ping(self) -> None:
        with _translated("ping"):
            await self._client.ping()
            if self._pipeline is not None:
                await self._pipeline.execute("PING")

    async def now_ms(self) -> int:
        reply: Any
        with _translated("now_ms"):
            reply = await self._client.time()
        seconds, micros = reply
        return int(seconds) * 1000 + int(micros) // 1000

    async def close(self) -> None:
        with _translated("close"):
            await self._client.aclose()
            for client in self._extra_clients:
                await client.aclose()
            if self._pipeline is not None:
                await self._pipeline.close()

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        key, meta = request.key, request.meta
        keys = [
            layout.record_key(key),
            layout.outbox_key(key.agent),
            layout.unknown_key(key.agent),
            layout.batch_key(key.agent, meta.batch),
            layout.leases_key(key.agent),
            layout.control_key(key.agent),
            layout.fence_key(key.agent),
            layout.cursor_key(key.agent),
        ]
        epoch = self._expected_epoch
        if epoch:
            keys.append(layout.MARKER_KEY)
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
            )
        )
        waited: object = None
        with _translated("claim"):
            # Listed first: an agent must be on the worklists by the time it has a record to sweep.
            waited_claim = self._waited_claim
            if waited_claim is None:
                reply = await self.agents.listed(
                    key.agent, lambda: self._claim(keys=keys, args=args)
                )
            else:
                reply, waited = await self.agents.listed(
                    key.agent, lambda: waited_claim(keys, args)
                )
        if int(reply[0]) == 3:
            raise StoreUnavailable(
                "the store's marker is not the one its last check found: it was emptied or"
                " restarted without its data since, so nothing was claimed until it is checked"
            )
        fence = int(reply[1])
        if int(reply[0]) == 1:
            wait = self._replica_wait
            # Only a claim that takes the key needs its replicas: any other sends nothing.
            short = None if wait is None else wait.shortfall(waited)
            return ClaimResult(
                claimed=True, fence=fence, first_attempt_ms=int(reply[2]), unreplicated=short
            )
        if int(reply[0]) == 2:
            return ClaimResult(claimed=False, fence=fence, paused=decode_pause(*reply[2:6]))
        return ClaimResult(claimed=False, fence=fence, record=decode_record(key, reply[2]))

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
                response=_response_args(settlement.response),
                streak=streak_args(
                    settlement.pause_after_failures, settlement.failure(), key.agent
                ),
            )
        )
        keys = [*_state_keys(key), *control_keys(key.agent), layout.audit_key(key.agent)]
        keys.append(layout.cursor_key(key.agent))
        with _translated("settle"):
            return int(await self._settle(keys=keys, args=args)) == 1

    async def resolve(
        self,
        key: RecordKey,
        expected: RecordState,
        resolution: Resolution,
        audit: AuditEntry | None = None,
        fence: int | None = None,
    ) -> ResolveResult:
        args = lua.RESOLVE.argv(
            ResolveArgs(
                effect_id=key.effect_id,
                expected_state=expected.value,
                state=resolution.state.value,
                ttl_ms=resolution.ttl_s * 1000,
                retention_ms=self._retention_ms,
                external_id=resolution.external_id,
                reason=resolution.reason,
                response=_response_args(resolution.response),
                has_audit=audit is not None,
                audit=audit_args(audit),
                expected_fence=fence,
            )
        )
        keys = [
            *_state_keys(key),
            layout.audit_key(key.agent),
            layout.fence_key(key.agent),
            layout.cursor_key(key.agent),
        ]
        with _translated("resolve"):
            reply = await self._resolve(keys=keys, args=args)
        record = decode_record(key, reply[1]) if reply[1] else None
        return ResolveResult(resolved=int(reply[0]) == 1, record=record)

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        with _translated("renew"):
            reply = await self._renew(
                keys=[layout.record_key(key), layout.leases_key(key.agent)],
                args=lua.RENEW.argv(RenewArgs(fence, lease_ms, key.effect_id)),
            )
        return int(reply) == 1

    async def get(self, key: RecordKey) -> EffectRecord | None:
        fields: Any  # bytes throughout: the client is built with decode_responses=False
        with _translated("get"):
            if self._pipeline is None:
                fields = await self._client.hgetall(layout.record_key(key))
            else:
                fields = await self._pipeline.execute("HGETALL", layout.record_key(key))
        return decode_record(key, fields) if fields else None

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        index = layout.unknown_key(agent)
        found: list[EffectRecord] = []
        start = 0
        ids: Any
        with _translated("list_unknown"):
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
        index = layout.batch_key(agent, batch)
        listed: Any
        held: Any
        with _translated("batch_records"):
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.smembers(index)
                pipe.zrange(layout.leases_key(agent), 0, -1)
                pipe.zrange(layout.unknown_key(agent), 0, -1)
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
        keys = [index] + [layout.record_key(RecordKey(agent, i.decode())) for i in ids]
        replies = await script(keys=keys, args=args)
        return [(i, reply) for i, reply in zip(ids, replies, strict=True) if reply]

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        if after is not None and not STREAM_ID.fullmatch(after):
            raise ValueError(f"not an event id of the redis store: {after!r}")
        if limit <= 0:
            return []  # XRANGE refuses COUNT 0
        start = "-" if after is None else f"({after}"
        entries: Any
        with _translated("read_events"):
            entries = await self._client.xrange(layout.outbox_key(agent), start, "+", count=limit)
        return [decode_event(agent, event_id, fields) for event_id, fields in entries]

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        """Candidates come from the leases index by this host's clock; the script decides by
        Redis's, so a skewed host clock delays a sweep but never lapses a live lease."""
        if limit <= 0:
            return []
        leases = layout.leases_key(agent)
        ids: Any
        with _translated("sweep_expired"):
            ids = await self._client.zrangebyscore(leases, "-inf", wall_ms(), start=0, num=limit)
            if not ids:
                return []
            keys = [leases, layout.outbox_key(agent), layout.unknown_key(agent)]
            keys.append(layout.cursor_key(agent))
            keys += [layout.record_key(RecordKey(agent, i.decode())) for i in ids]
            lapsed = await self._sweep(
                keys=keys,
                args=lua.SWEEP.argv(
                    SweepArgs(self._retention_ms, EXPIRED_LEASE_REASON, tuple(ids))
                ),
            )
        return [decode_record(RecordKey(agent, i.decode()), fields) for i, fields in lapsed]

    async def durability(self) -> Durability:
        return await redis_durability.durability(self._client)

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
        return await self._marker.check(seen)

    def expect_marker(self, marker: Marker | None) -> None:
        if not isinstance(self._client, RedisCluster):
            self._expected_epoch = marker.epoch if marker is not None else ""

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        return await self._marker.record_loss(kind, detail)

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        return await self._marker.acknowledge(loss_id, actor, note)

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        return await self._marker.read_log(limit)


def _state_keys(key: RecordKey) -> list[str]:
    """The keys a settle or resolve script changes: record, outbox, review zset, leases."""
    return [
        layout.record_key(key),
        layout.outbox_key(key.agent),
        layout.unknown_key(key.agent),
        layout.leases_key(key.agent),
    ]


def _response_args(response: StoredResponse | None) -> ResponseArgs:
    if response is None:
        return NO_RESPONSE
    headers = dump_headers(response.headers)
    return ResponseArgs(True, response.status, headers, response.body, response.body_truncated)


def decode_record(key: RecordKey, raw: Any) -> EffectRecord:
    """A record from its hash: ``HGETALL`` as a dict of bytes, or flat from a script."""
    try:
        fields: dict[bytes, bytes]
        fields = raw if isinstance(raw, dict) else dict(zip(raw[::2], raw[1::2], strict=True))

        def text(name: str) -> str:
            return fields[name.encode()].decode()

        response = None
        if RecordField.STATUS.encode() in fields:
            response = StoredResponse(
                status=int(text(RecordField.STATUS)),
                headers=load_headers(fields[RecordField.HEADERS.encode()]),
                body=fields[RecordField.BODY.encode()],
                body_truncated=text(RecordField.TRUNCATED) == "1",
            )
        return EffectRecord(
            key=key,
            state=RecordState(text(RecordField.STATE)),
            fence=int(text(RecordField.FENCE)),
            fingerprint=text(RecordField.FINGERPRINT),
            meta=EffectMeta(
                batch=text(RecordField.BATCH),
                tool_call=text(RecordField.TOOL_CALL),
                action=text(RecordField.ACTION),
                upstream=text(RecordField.UPSTREAM),
                method=text(RecordField.METHOD),
                path=text(RecordField.PATH),
            ),
            lease_expires_ms=int(text(RecordField.LEASE_EXPIRES_MS)),
            created_ms=int(text(RecordField.CREATED_MS)),
            updated_ms=int(text(RecordField.UPDATED_MS)),
            attempts=int(text(RecordField.ATTEMPTS)),
            response=response,
            external_id=text(RecordField.EXTERNAL_ID),
            reason=text(RecordField.REASON),
        )
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise StoreCorrupt(f"effect record {key} cannot be decoded: {exc!r}") from exc


def decode_event(agent: str, event_id: Any, raw: Any) -> EffectEvent:
    """An event from its outbox stream entry."""
    try:
        fields = {name.decode(): value.decode() for name, value in raw.items()}
        return EffectEvent(
            event_id=event_id.decode(),
            type=EventType(fields[EventField.TYPE]),
            key=RecordKey(agent, fields[EventField.EFFECT_ID]),
            meta=EffectMeta(
                batch=fields[EventField.BATCH],
                tool_call=fields[EventField.TOOL_CALL],
                action=fields[EventField.ACTION],
                upstream=fields[EventField.UPSTREAM],
                method=fields[EventField.METHOD],
                path=fields[EventField.PATH],
            ),
            status=int(fields[EventField.STATUS]),
            external_id=fields[EventField.EXTERNAL_ID],
            reason=fields[EventField.REASON],
            ts_ms=int(fields[EventField.TS_MS]),
            state=fields.get(EventField.STATE, ""),
        )
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise StoreCorrupt(f"event {event_id!r} of agent {agent!r} cannot be decoded") from exc
