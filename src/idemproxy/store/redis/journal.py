"""The ledger's part of the Redis store: the outbox, delivery cursors, the audit log, archives.

Keys are those of :mod:`.keys`; every script touches one agent's slot.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.clock import wall_ms
from idemproxy.store.control import abandon_reason
from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.journal import AuditEntry, ClearRequest, DeliveryCursor
from idemproxy.store.outcomes import ArchivedOutcome, decode_outcome, in_order
from idemproxy.store.records import EffectEvent, EffectMeta, EventType, RecordKey
from idemproxy.store.redis import lua
from idemproxy.store.redis.agents import RedisAgents
from idemproxy.store.redis.argv import (
    NO_AUDIT,
    AuditArgs,
    ClearBatchArgs,
    CountEventsArgs,
    ScriptArg,
    WriteCursorArgs,
)
from idemproxy.store.redis.errors import translated
from idemproxy.store.redis.fields import AuditField, CursorField, EventField
from idemproxy.store.redis.keys import (
    archive_key,
    audit_key,
    batch_key,
    cursor_key,
    outbox_key,
    outcomes_key,
    record_key,
)
from idemproxy.store.retention import Retention

STREAM_ID = re.compile(r"\d+-\d+")  # an event or audit entry id

# Each DeliveryCursor attribute, by the cursor hash's field that holds it.
_CURSOR_FIELDS = {
    "acked": CursorField.ACKED,
    "owner": CursorField.OWNER,
    "lease_expires_ms": CursorField.LEASE_EXPIRES_MS,
    "attempts": CursorField.ATTEMPTS,
    "retry_at_ms": CursorField.RETRY_AT_MS,
    "last_error": CursorField.LAST_ERROR,
    "parked_ms": CursorField.PARKED_MS,
}


class RedisJournal:
    """The journal operations of :class:`~idemproxy.store.redis.store.RedisStore`: outbox
    events, delivery cursors, audit entries and archives."""

    def __init__(
        self, client: Redis | RedisCluster, retention: Retention, agents: RedisAgents | None = None
    ) -> None:
        """``agents`` lists an agent before an event is written outside a record's script."""
        self._client = client
        self._agents = agents
        self._retention = retention
        self._retention_ms = retention.events_ms  # the outbox's
        self._write_cursor = client.register_script(lua.WRITE_CURSOR.source)
        self._clear_batch = client.register_script(lua.CLEAR_BATCH.source)
        self._count_events = client.register_script(lua.COUNT_EVENTS.source)

    async def read_events(
        self, agent: str, after: str | None = None, limit: int = 100
    ) -> list[EffectEvent]:
        if after is not None and not STREAM_ID.fullmatch(after):
            raise ValueError(f"not an event id of the redis store: {after!r}")
        if limit <= 0:
            return []  # XRANGE refuses COUNT 0
        start = "-" if after is None else f"({after}"
        entries: Any
        with translated("read_events"):
            entries = await self._client.xrange(outbox_key(agent), start, "+", count=limit)
        return [decode_event(agent, event_id, fields) for event_id, fields in entries]

    async def count_events(self, agent: str, after: str | None = None, cap: int = 10_000) -> int:
        if after is not None and not STREAM_ID.fullmatch(after):
            raise ValueError(f"not an event id of the redis store: {after!r}")
        if cap <= 0:
            return 0
        start = "-" if after is None else f"({after}"
        with translated("count_events"):
            args = lua.COUNT_EVENTS.argv(CountEventsArgs(start, cap))
            count = await self._count_events(keys=[outbox_key(agent)], args=args)
        return int(count)

    async def read_cursor(self, agent: str) -> DeliveryCursor:
        raw: Any
        with translated("read_cursor"):
            raw = await self._client.hgetall(cursor_key(agent))
        if not raw:
            return DeliveryCursor()
        try:
            fields = {name.decode(): value.decode() for name, value in raw.items()}
            return DeliveryCursor(
                acked=fields[CursorField.ACKED],
                owner=fields[CursorField.OWNER],
                lease_expires_ms=int(fields[CursorField.LEASE_EXPIRES_MS]),
                attempts=int(fields[CursorField.ATTEMPTS]),
                retry_at_ms=int(fields[CursorField.RETRY_AT_MS]),
                last_error=fields[CursorField.LAST_ERROR],
                parked_ms=int(fields[CursorField.PARKED_MS]),
                version=int(fields[CursorField.VERSION]),
            )
        except (KeyError, ValueError) as exc:
            raise StoreCorrupt(f"delivery cursor of agent {agent!r} cannot be decoded") from exc

    async def write_cursor(
        self, agent: str, cursor: DeliveryCursor, audit: AuditEntry | None = None
    ) -> DeliveryCursor | None:
        keys = [cursor_key(agent), audit_key(agent), outbox_key(agent)]
        fields: list[ScriptArg] = []
        for attribute, field in _CURSOR_FIELDS.items():
            fields += [field.value, getattr(cursor, attribute)]
        args = lua.WRITE_CURSOR.argv(
            WriteCursorArgs(
                cursor.version,
                self._retention_ms,
                audit is not None,
                audit_args(audit, self._retention.audit_ms),
                tuple(fields),
            )
        )
        with translated("write_cursor"):
            written = await self._write_cursor(keys=keys, args=args)
        return dataclasses.replace(cursor, version=cursor.version + 1) if written else None

    async def append_audit(self, entry: AuditEntry) -> AuditEntry:
        stream = audit_key(entry.agent)
        fields = {
            AuditField.ACTION: entry.action,
            AuditField.ACTOR: entry.actor,
            AuditField.TARGET: entry.target,
            AuditField.BEFORE: entry.before,
            AuditField.AFTER: entry.after,
            AuditField.NOTE: entry.note,
        }
        reply: Any
        with translated("append_audit"):
            async with self._client.pipeline(transaction=False) as pipe:
                minid = wall_ms() - self._retention.audit_ms
                pipe.xadd(stream, fields, minid=minid, approximate=True)  # type: ignore[arg-type]
                pipe.pexpire(stream, self._retention.audit_ms)
                reply = await pipe.execute()
        return _stamped(entry, reply[0].decode())

    async def read_audit(self, agent: str, limit: int = 100) -> list[AuditEntry]:
        if limit <= 0:
            return []
        entries: Any
        with translated("read_audit"):
            entries = await self._client.xrevrange(audit_key(agent), count=limit)
        return [decode_audit(agent, entry_id, fields) for entry_id, fields in reversed(entries)]

    async def clear_batch(self, request: ClearRequest) -> list[str]:
        agent, batch, freed = request.agent, request.batch, request.records
        archive, audit = request.archive, request.audit
        keys = [batch_key(agent, batch), archive_key(agent, batch)]
        keys += [audit_key(agent), outbox_key(agent), cursor_key(agent)]
        keys += [record_key(RecordKey(agent, item.effect_id)) for item in freed]
        pairs: list[ScriptArg] = []
        for item in freed:
            pairs += [item.effect_id, item.fence]
        args = lua.CLEAR_BATCH.argv(
            ClearBatchArgs(
                has_archive=archive is not None,
                archive=archive or b"",
                archive_retention_ms=self._retention.archive_ms,
                audit=audit_args(audit, self._retention.audit_ms),
                event_retention_ms=self._retention_ms,
                event_batch=batch,
                event_reason=abandon_reason(audit),
                id_fence_pairs=tuple(pairs),
            )
        )
        cleared: Any
        with translated("clear_batch"):
            if archive is not None and self._agents is not None:
                await self._agents.register(agent)  # its batch.abandoned must be delivered
            cleared = await self._clear_batch(keys=keys, args=args)
        return [effect_id.decode() for effect_id in cleared]

    async def read_archive(self, agent: str, batch: str) -> bytes | None:
        archive: Any
        with translated("read_archive"):
            archive = await self._client.get(archive_key(agent, batch))
        return bytes(archive) if archive is not None else None

    async def read_outcomes(self, agent: str, batch: str) -> list[ArchivedOutcome]:
        entries: Any
        with translated("read_outcomes"):
            entries = await self._client.hvals(outcomes_key(agent, batch))
        return in_order([decode_outcome(bytes(entry)) for entry in entries])


def audit_args(audit: AuditEntry | None, retention_ms: int) -> AuditArgs:
    """An entry as the scripts take it (unused when None), its stream kept ``retention_ms``."""
    if audit is None:
        return NO_AUDIT
    return AuditArgs(
        retention_ms, audit.action, audit.actor, audit.target, audit.before, audit.after, audit.note
    )


def _stamped(entry: AuditEntry, entry_id: str) -> AuditEntry:
    """The entry with its stream id and the time in it (Redis's clock when it was added)."""
    return dataclasses.replace(entry, ts_ms=int(entry_id.partition("-")[0]), entry_id=entry_id)


def decode_audit(agent: str, entry_id: Any, raw: Any) -> AuditEntry:
    """An audit entry from its stream entry (the store's own log has the same fields)."""
    try:
        fields = {name.decode(): value.decode() for name, value in raw.items()}
        entry = AuditEntry(
            agent=agent,
            action=fields[AuditField.ACTION],
            actor=fields[AuditField.ACTOR],
            target=fields[AuditField.TARGET],
            before=fields[AuditField.BEFORE],
            after=fields[AuditField.AFTER],
            note=fields[AuditField.NOTE],
        )
        return _stamped(entry, entry_id.decode())
    except (KeyError, ValueError, AttributeError) as exc:
        raise StoreCorrupt(
            f"audit entry {entry_id!r} of agent {agent!r} cannot be decoded"
        ) from exc


def _extra(text: str) -> dict[str, str]:
    """An event's extra fields: the script's JSON object of strings, or none."""
    if not text:
        return {}
    loaded = orjson.loads(text)
    if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
        raise ValueError(f"extra is not an object of strings: {loaded!r}")
    return {str(name): value for name, value in loaded.items()}


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
            extra=_extra(fields.get(EventField.EXTRA, "")),
        )
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise StoreCorrupt(f"event {event_id!r} of agent {agent!r} cannot be decoded") from exc
