"""The rows of the records, events and fences tables (store/sqlite/schema.py), written and
read on the store's own thread, inside its transactions."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.headers import dump_headers, load_headers
from idemproxy.store.records import (
    EffectEvent,
    EffectMeta,
    EffectRecord,
    EventType,
    RecordKey,
    RecordState,
    StoredResponse,
)
from idemproxy.store.retention import FENCE_RETENTION_MS
from idemproxy.store.sqlite import worklist
from idemproxy.store.work import Work

# Spliced into SQL text below (hence the S608 waivers): a constant, never user input.
_RECORD_COLUMNS = (
    "agent, effect_id, state, fence, fingerprint, batch, tool_call, action, upstream, method,"
    " path, lease_expires_ms, created_ms, updated_ms, attempts, status, headers, body,"
    " body_truncated, external_id, reason, expires_ms"
)


def load(db: sqlite3.Connection, key: RecordKey, now_ms: int) -> tuple[EffectRecord, int] | None:
    """The live record and its ``expires_ms``; a record past its TTL counts as absent."""
    row = db.execute(
        f"SELECT {_RECORD_COLUMNS} FROM records WHERE agent = ? AND effect_id = ?",  # noqa: S608
        (key.agent, key.effect_id),
    ).fetchone()
    if row is None or row["expires_ms"] <= now_ms:
        return None
    return decode_record(row), row["expires_ms"]


def select(db: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> list[EffectRecord]:
    """Records matching a fixed ``WHERE ... ORDER BY`` clause written by the store."""
    rows = db.execute(f"SELECT {_RECORD_COLUMNS} FROM records {where}", params)  # noqa: S608
    return [decode_record(row) for row in rows]


def save(db: sqlite3.Connection, record: EffectRecord, expires_ms: int) -> None:
    """Insert or overwrite the record's row."""
    response, meta = record.response, record.meta
    db.execute(
        f"INSERT OR REPLACE INTO records ({_RECORD_COLUMNS})"  # noqa: S608
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.key.agent,
            record.key.effect_id,
            record.state.value,
            record.fence,
            record.fingerprint,
            meta.batch,
            meta.tool_call,
            meta.action,
            meta.upstream,
            meta.method,
            meta.path,
            record.lease_expires_ms,
            record.created_ms,
            record.updated_ms,
            record.attempts,
            response.status if response else None,
            dump_headers(response.headers) if response else None,
            response.body if response else None,
            int(response.body_truncated) if response else 0,
            record.external_id,
            record.reason,
            expires_ms,
        ),
    )


def append_event(
    db: sqlite3.Connection, record: EffectRecord, type_: EventType, now_ms: int
) -> None:
    """Add the record's current state to the outbox; its agent goes on delivery's worklist."""
    meta = record.meta
    status = record.status
    _insert_event(
        db,
        type_,
        record.key,
        meta,
        (status, record.external_id, record.reason),
        now_ms,
        record.state.value,
    )
    if type_ is EventType.UNKNOWN:  # the agent is in error until someone decides
        append_agent_event(
            db, EventType.AGENT_ERROR, record.key, meta, record.reason, record.state.value, now_ms
        )


def append_agent_event(
    db: sqlite3.Connection,
    type_: EventType,
    key: RecordKey,
    meta: EffectMeta,
    reason: str,
    state: str,
    now_ms: int,
) -> None:
    """Add an event of the agent (``key.effect_id`` "" when no one effect caused it)."""
    _insert_event(db, type_, key, meta, (0, "", reason), now_ms, state)


def _insert_event(
    db: sqlite3.Connection,
    type_: EventType,
    key: RecordKey,
    meta: EffectMeta,
    answer: tuple[int, str, str],
    now_ms: int,
    state: str,
    extra: dict[str, str] | None = None,
) -> None:
    """One outbox row; ``answer`` is the status, external id and reason the event reports,
    ``extra`` what it carries beside them (an orjson object, '' for none). The agent goes on
    delivery's worklist."""
    status, external_id, reason = answer
    worklist.add(db, key.agent, Work.DELIVERY)
    db.execute(
        "INSERT INTO events (agent, effect_id, type, batch, tool_call, action, upstream, method,"
        " path, status, external_id, reason, ts_ms, state, extra)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            key.agent,
            key.effect_id,
            type_.value,
            meta.batch,
            meta.tool_call,
            meta.action,
            meta.upstream,
            meta.method,
            meta.path,
            status,
            external_id,
            reason,
            now_ms,
            state,
            orjson.dumps(extra) if extra else b"",
        ),
    )


def append_extra_event(
    db: sqlite3.Connection,
    type_: EventType,
    key: RecordKey,
    meta: EffectMeta,
    reason: str,
    state: str,
    extra: dict[str, str],
    now_ms: int,
) -> None:
    """Add an event that carries ``extra`` beside the effect's fields (an approval's)."""
    _insert_event(db, type_, key, meta, (0, "", reason), now_ms, state, extra)


def read_events(db: sqlite3.Connection, agent: str, after_id: int, limit: int) -> list[EffectEvent]:
    """The agent's events with ``id`` above ``after_id``, oldest first."""
    rows = db.execute(
        "SELECT * FROM events WHERE agent = ? AND id > ? ORDER BY id LIMIT ?",
        (agent, after_id, limit),
    )
    try:
        return [
            EffectEvent(
                event_id=f"{row['id']:020d}",
                type=EventType(row["type"]),
                key=RecordKey(row["agent"], row["effect_id"]),
                meta=meta_of(row),
                status=row["status"],
                external_id=row["external_id"],
                reason=row["reason"],
                ts_ms=row["ts_ms"],
                state=row["state"],
                extra=_extra(row["extra"]),
            )
            for row in rows
        ]
    except (ValueError, TypeError) as exc:
        raise StoreCorrupt(f"an event of agent {agent!r} cannot be decoded: {exc}") from exc


def next_fence(db: sqlite3.Connection, agent: str, above: int, now_ms: int) -> int:
    """A fence above ``above`` and above every fence the agent's keys ever had."""
    row = db.execute("SELECT fence FROM fences WHERE agent = ?", (agent,)).fetchone()
    fence = max(row[0] if row else 0, above) + 1
    db.execute(
        "INSERT OR REPLACE INTO fences (agent, fence, touched_ms) VALUES (?, ?, ?)",
        (agent, fence, now_ms),
    )
    return int(fence)


def purge(db: sqlite3.Connection, now_ms: int, retention_ms: int) -> None:
    """Delete records past their TTL, delivered events past the retention and long-idle fence
    counters."""
    db.execute("DELETE FROM records WHERE expires_ms <= ?", (now_ms,))
    # An agent with a delivery cursor has a recovery controller waiting: its events after the
    # last one accepted are kept past the retention, until delivered (acked '' keeps them all).
    db.execute(
        "DELETE FROM events WHERE ts_ms < ? AND id <= COALESCE("
        "(SELECT CAST(acked AS INTEGER) FROM cursors WHERE cursors.agent = events.agent), id)",
        (now_ms - retention_ms,),
    )
    db.execute("DELETE FROM fences WHERE touched_ms < ?", (now_ms - FENCE_RETENTION_MS,))


def decode_record(row: sqlite3.Row) -> EffectRecord:
    """A record from its row; :class:`StoreCorrupt` if a value is not what was written."""
    try:
        response = None
        if row["status"] is not None:
            response = StoredResponse(
                status=row["status"],
                headers=load_headers(row["headers"]),
                body=bytes(row["body"]),
                body_truncated=bool(row["body_truncated"]),
            )
        return EffectRecord(
            key=RecordKey(row["agent"], row["effect_id"]),
            state=RecordState(row["state"]),
            fence=row["fence"],
            fingerprint=row["fingerprint"],
            meta=meta_of(row),
            lease_expires_ms=row["lease_expires_ms"],
            created_ms=row["created_ms"],
            updated_ms=row["updated_ms"],
            attempts=row["attempts"],
            response=response,
            external_id=row["external_id"],
            reason=row["reason"],
        )
    except (ValueError, TypeError) as exc:
        raise StoreCorrupt(f"effect record {row['agent']}/{row['effect_id']}: {exc}") from exc


def _extra(data: bytes | str) -> dict[str, str]:
    """An event's ``extra`` as written: an object of strings, or nothing."""
    if not data:
        return {}
    loaded = orjson.loads(data)
    if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
        raise ValueError(f"extra is not an object of strings: {loaded!r}")
    return {str(name): value for name, value in loaded.items()}


def meta_of(row: sqlite3.Row) -> EffectMeta:
    """The effect's facts from a row with their columns (records, events, approvals)."""
    return EffectMeta(
        batch=row["batch"],
        tool_call=row["tool_call"],
        action=row["action"],
        upstream=row["upstream"],
        method=row["method"],
        path=row["path"],
    )
