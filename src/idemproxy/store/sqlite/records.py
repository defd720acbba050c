"""The SQLite store's effect records (:class:`~idemproxy.store.protocols.RecordStore`): each
change one transaction that writes the record and appends its event together."""

from __future__ import annotations

import dataclasses
import sqlite3

from idemproxy.store.decisions import (
    HELD_MS,
    ClaimStep,
    claim_step,
    claimed_record,
    expires_ms,
    holds,
    lease_lapsed,
    resolvable,
    resolved_record,
    settled_record,
)
from idemproxy.store.records import (
    Claimed,
    ClaimRequest,
    ClaimResult,
    EffectRecord,
    EventType,
    Paused,
    RecordKey,
    Refused,
    Resolved,
    ResolveRequest,
    ResolveResult,
    Settlement,
    Standing,
)
from idemproxy.store.sqlite import control, journal, outcomes, rows
from idemproxy.store.sqlite.file import SQLiteFile

# Fixed WHERE ... ORDER BY clauses of rows.select().
_UNKNOWN = (
    "WHERE agent = ? AND state = 'unknown' AND expires_ms > ? ORDER BY updated_ms, rowid LIMIT ?"
)
_BATCH = "WHERE agent = ? AND batch = ? AND expires_ms > ? ORDER BY created_ms, rowid"
_LAPSED = (
    "WHERE agent = ? AND state = 'in_flight' AND lease_expires_ms <= ?"
    " AND expires_ms > ? ORDER BY lease_expires_ms, rowid LIMIT ?"
)


class SQLiteRecords:
    backend = "sqlite"

    def __init__(self, file: SQLiteFile) -> None:
        self._file = file

    async def ping(self) -> None:
        await self._file.run(lambda db: db.execute("SELECT 1").fetchone())

    async def now_ms(self) -> int:
        return await self._file.read(lambda db, now_ms: now_ms)

    async def close(self) -> None:
        await self._file.close()

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        return await self._file.write(lambda db, now_ms: _claim(db, request, now_ms))

    async def settle(self, key: RecordKey, fence: int, settlement: Settlement) -> bool:
        def settle(db: sqlite3.Connection, now_ms: int) -> bool:
            found = rows.load(db, key, now_ms)
            if found is None or not holds(found[0], fence):
                return False
            record = settled_record(found[0], settlement, now_ms)
            rows.save(db, record, expires_ms(record.state, now_ms, settlement.ttl_s))
            outcomes.archive(db, record, now_ms)
            rows.append_event(db, record, settlement.event_type(), now_ms)
            if settlement.pause_after_failures > 0:
                control.count(db, key, fence, settlement, now_ms)
            return True

        return await self._file.write(settle)

    async def resolve(self, request: ResolveRequest) -> ResolveResult:
        key, resolution = request.key, request.resolution

        def resolve(db: sqlite3.Connection, now_ms: int) -> ResolveResult:
            found = rows.load(db, key, now_ms)
            if found is None or not resolvable(found[0], request.expected, request.fence):
                return Refused(found[0] if found else None)
            fence = rows.next_fence(db, key.agent, found[0].fence, now_ms)
            record = resolved_record(found[0], resolution, fence, now_ms)
            rows.save(db, record, now_ms + resolution.ttl_s * 1000)
            outcomes.archive(db, record, now_ms)
            rows.append_event(db, record, EventType.RESOLVED, now_ms)
            if request.audit is not None:
                journal.append_audit(db, request.audit, now_ms)
            return Resolved(record)

        return await self._file.write(resolve)

    async def renew(self, key: RecordKey, fence: int, lease_ms: int) -> bool:
        def renew(db: sqlite3.Connection, now_ms: int) -> bool:
            found = rows.load(db, key, now_ms)
            if found is None or not holds(found[0], fence):
                return False
            record = dataclasses.replace(found[0], lease_expires_ms=now_ms + lease_ms)
            rows.save(db, record, found[1])
            return True

        return await self._file.write(renew)

    async def get(self, key: RecordKey) -> EffectRecord | None:
        found = await self._file.read(lambda db, now_ms: rows.load(db, key, now_ms))
        return found[0] if found else None

    async def list_unknown(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        return await self._file.read(
            lambda db, now_ms: rows.select(db, _UNKNOWN, (agent, now_ms, max(limit, 0)))
        )

    async def batch_records(self, agent: str, batch: str) -> list[EffectRecord]:
        return await self._file.read(
            lambda db, now_ms: rows.select(db, _BATCH, (agent, batch, now_ms))
        )

    async def sweep_expired(self, agent: str, limit: int = 100) -> list[EffectRecord]:
        def sweep(db: sqlite3.Connection, now_ms: int) -> list[EffectRecord]:
            lapsed = rows.select(db, _LAPSED, (agent, now_ms, now_ms, max(limit, 0)))
            return [_lapse(db, record, now_ms) for record in lapsed]

        return await self._file.write(sweep)


def _lapse(db: sqlite3.Connection, record: EffectRecord, now_ms: int) -> EffectRecord:
    """Turn an in-flight record whose lease ran out unknown, inside the caller's transaction."""
    record = lease_lapsed(record, now_ms)
    rows.save(db, record, HELD_MS)
    rows.append_event(db, record, EventType.UNKNOWN, now_ms)
    return record


def _claim(db: sqlite3.Connection, request: ClaimRequest, now_ms: int) -> ClaimResult:
    """The claim decision of :meth:`RecordStore.claim`, inside the caller's transaction."""
    found = rows.load(db, request.key, now_ms)
    record = found[0] if found else None
    step = claim_step(record, request, now_ms)
    if record is not None and step is ClaimStep.LAPSE:
        record = _lapse(db, record, now_ms)
    if record is not None and step is ClaimStep.REPLAY:
        rows.append_event(db, record, EventType.REPLAYED, now_ms)
    if record is not None and step is not ClaimStep.TAKE:
        return Standing(record, lapsed=step is ClaimStep.LAPSE)
    pause = None if request.ignore_pause else control.load(db, request.key.agent).pause
    if pause is not None:
        return Paused(pause)
    fence = rows.next_fence(db, request.key.agent, record.fence if record else 0, now_ms)
    claimed = claimed_record(request, record, fence, now_ms)
    rows.save(db, claimed, HELD_MS)
    journal.register(db, request.key.agent)
    return Claimed(claimed.fence, first_attempt_ms=claimed.created_ms)
