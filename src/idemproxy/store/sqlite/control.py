"""The SQLite store's table of agent controls (store/control.py); called only on the store's
own thread, inside its transactions::

    controls  one row per agent that was ever paused or failed: the pause, the failure streak
              and the snapshot (JSON lists of [effect_id, fence]), and a compare-and-set version
"""

from __future__ import annotations

import sqlite3

import orjson

from idemproxy.store.batches import MAX_LISTED_BATCHES, BatchStart
from idemproxy.store.control import (
    AgentControl,
    FailedAttempt,
    Pause,
    PauseOrigin,
    PauseRequest,
    auto_pause_audit,
    counted,
    pause_event,
    written_pause,
)
from idemproxy.store.errors import StoreCorrupt
from idemproxy.store.records import EffectMeta, EventType, RecordKey, Settlement
from idemproxy.store.sqlite import journal, rows, worklist
from idemproxy.store.sqlite.file import SQLiteFile
from idemproxy.store.work import Forgotten, Work

TABLES = (
    """CREATE TABLE IF NOT EXISTS controls (
        agent TEXT PRIMARY KEY, paused TEXT NOT NULL, reason TEXT NOT NULL, actor TEXT NOT NULL,
        since_ms INTEGER NOT NULL, streak BLOB NOT NULL, snapshot BLOB NOT NULL,
        version INTEGER NOT NULL, updated_ms INTEGER NOT NULL)""",
)


def _attempts(data: bytes) -> tuple[FailedAttempt, ...]:
    return tuple(
        FailedAttempt(str(effect_id), int(fence)) for effect_id, fence in orjson.loads(data)
    )


def load(db: sqlite3.Connection, agent: str) -> AgentControl:
    """The agent's control, or a fresh one."""
    row = db.execute("SELECT * FROM controls WHERE agent = ?", (agent,)).fetchone()
    if row is None:
        return AgentControl()
    try:
        pause = None
        if row["paused"]:
            origin = PauseOrigin(row["paused"])
            pause = Pause(origin, row["reason"], row["actor"], row["since_ms"])
        return AgentControl(
            pause, _attempts(row["streak"]), _attempts(row["snapshot"]), row["version"]
        )
    except (ValueError, TypeError) as exc:
        raise StoreCorrupt(f"the control of agent {agent!r} cannot be decoded: {exc}") from exc


def save(db: sqlite3.Connection, agent: str, control: AgentControl, now_ms: int) -> None:
    """Write the agent's control; a paused agent goes on the sweep's worklist, to be counted."""
    pause = control.pause
    if pause is not None:
        worklist.add(db, agent, Work.REVIEW)
    db.execute(
        "INSERT OR REPLACE INTO controls (agent, paused, reason, actor, since_ms, streak,"
        " snapshot, version, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            agent,
            pause.origin.value if pause else "",
            pause.reason if pause else "",
            pause.actor if pause else "",
            pause.since_ms if pause else 0,
            orjson.dumps([[a.effect_id, a.fence] for a in control.streak]),
            orjson.dumps([[a.effect_id, a.fence] for a in control.snapshot]),
            control.version,
            now_ms,
        ),
    )


def count(
    db: sqlite3.Connection, key: RecordKey, fence: int, settlement: Settlement, now_ms: int
) -> None:
    """Keep the agent's failure streak after a settle, and pause the agent at the threshold."""
    control = load(db, key.agent)
    error = settlement.failure()
    if error is None and not control.streak:
        return  # the common case, a success after a success: nothing to write
    attempt = FailedAttempt(key.effect_id, fence)
    limit = settlement.pause_after_failures
    control, paused = counted(control, attempt, error, limit, now_ms)
    save(db, key.agent, control, now_ms)
    if paused and control.pause is not None:
        reason = control.pause.reason
        journal.append_audit(db, auto_pause_audit(key.agent, reason), now_ms)
        found = rows.load(db, key, now_ms)
        meta = found[0].meta if found is not None else EffectMeta()
        rows.append_agent_event(db, EventType.AGENT_PAUSED, key, meta, reason, "paused", now_ms)


def purge(db: sqlite3.Connection, now_ms: int, retention_ms: int) -> None:
    """Forget the controls of agents untouched for ``retention_ms`` (as long as their audit log
    is kept)."""
    db.execute("DELETE FROM controls WHERE updated_ms < ?", (now_ms - retention_ms,))


# The records index (agent, batch, created_ms) serves the grouping.
_BATCHES = (
    "SELECT batch, MIN(created_ms) FROM records WHERE agent = ? AND batch != ''"
    " AND expires_ms > ? GROUP BY batch ORDER BY MIN(created_ms) DESC, batch DESC LIMIT ?"
)


def list_batches(db: sqlite3.Connection, agent: str, now_ms: int, limit: int) -> list[BatchStart]:
    """The agent's batches with a live record, newest first (store/batches.py)."""
    bound = max(min(limit, MAX_LISTED_BATCHES), 0)
    found = db.execute(_BATCHES, (agent, now_ms, bound)).fetchall()
    return [BatchStart(str(batch), int(started_ms)) for batch, started_ms in found]


class SQLiteControl:
    """The :class:`~idemproxy.store.protocols.Control` on the controls table and worklists."""

    def __init__(self, file: SQLiteFile) -> None:
        self._file = file

    async def read_control(self, agent: str) -> AgentControl:
        return await self._file.run(lambda db: load(db, agent))

    async def write_pause(self, request: PauseRequest) -> AgentControl | None:
        def write(db: sqlite3.Connection, now_ms: int) -> AgentControl | None:
            current = load(db, request.agent)
            if current.version != request.version:
                return None
            written = written_pause(current, request, now_ms)
            save(db, request.agent, written, now_ms)
            journal.append_audit(db, request.audit, now_ms)
            type_, reason, state = pause_event(request)
            key, meta = RecordKey(request.agent, ""), EffectMeta()
            rows.append_agent_event(db, EventType(type_), key, meta, reason, state, now_ms)
            return written

        return await self._file.write(write)

    async def list_agents(self) -> list[str]:
        return await self._file.run(journal.list_agents)

    async def list_busy_agents(self, work: Work) -> list[str]:
        return await self._file.run(lambda db: worklist.list_busy(db, work))

    async def list_batches(self, agent: str, limit: int = 100) -> list[BatchStart]:
        return await self._file.read(lambda db, now_ms: list_batches(db, agent, now_ms, limit))

    async def forget_agents(self) -> Forgotten:
        return await self._file.write(
            lambda db, now_ms: Forgotten(idle=worklist.forget_idle(db, now_ms))
        )
