"""The Redis store's marker (store/safety.py).

The marker, the standing loss and the store's log are the three keys of the tag
``{idem:store}`` (:mod:`.keys`), so each script below touches one slot. The decision is
:func:`~idemproxy.store.safety.next_check`, the same as the other backends', made in Python
between two scripts: one reads the three keys at once, the other writes the outcome only if
the marker and the loss are still as read (compare-and-set), else the check reads again.

On Redis Cluster the marker lives on the master of its slot, so it shows what that master
lost, not what the others did (docs/reliability.md says so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from idemproxy.store.errors import StoreCorrupt, StoreUnavailable
from idemproxy.store.journal import AuditEntry
from idemproxy.store.redis import durability as redis_durability
from idemproxy.store.redis import lua
from idemproxy.store.redis.argv import (
    NO_LOG_ENTRY,
    NO_LOSS,
    NO_MARKER,
    LogEntryArgs,
    LossArgs,
    MarkerArgs,
    WriteMarkerArgs,
)
from idemproxy.store.redis.errors import translated
from idemproxy.store.redis.fields import LossField, MarkerField
from idemproxy.store.redis.journal import decode_audit
from idemproxy.store.redis.keys import LOSS_KEY, MARKER_KEY, STORE_LOG_KEY
from idemproxy.store.redis.records import RedisRecords
from idemproxy.store.safety import (
    LOG_LIMIT,
    Durability,
    Loss,
    LossKind,
    Marker,
    MarkerCheck,
    acknowledged,
    acknowledgement_entry,
    fresh_id,
    loss_entry,
    marked_entry,
    next_check,
)

# A check that loses the race this often in a row is reported as an outage, not looped on.
MAX_ATTEMPTS = 10

_KEYS = [MARKER_KEY, LOSS_KEY, STORE_LOG_KEY]
_KEEP_LOSS, _WRITE_LOSS, _DELETE_LOSS = "0", "1", "2"


@dataclass(frozen=True, slots=True)
class _Stored:
    """The three keys as one read found them."""

    marker: Marker | None
    loss: Loss | None
    logged: bool
    now_ms: int


class RedisSafety:
    """The store-wide safety of :class:`~idemproxy.store.redis.store.RedisStore`: what Redis
    says of its durability, the marker, losses and the store's log."""

    def __init__(self, client: Redis | RedisCluster, records: RedisRecords) -> None:
        """``records`` compares the marker's epoch inside each claim (:meth:`expect_marker`)."""
        self._client = client
        self._records = records
        self._read = client.register_script(lua.READ_MARKER.source)
        self._write_script = client.register_script(lua.WRITE_MARKER.source)

    async def durability(self) -> Durability:
        return await redis_durability.durability(self._client)

    def expect_marker(self, marker: Marker | None) -> None:
        # On Redis Cluster the marker lives in a slot of its own, which no claim can read.
        if not isinstance(self._client, RedisCluster):
            self._records.expected_epoch = marker.epoch if marker is not None else ""

    async def check_marker(self, seen: Marker | None) -> MarkerCheck:
        with translated("check_marker"):
            for _ in range(MAX_ATTEMPTS):
                stored = await self._stored()
                found = next_check(
                    stored.marker, stored.loss, stored.logged, seen, stored.now_ms, fresh_id()
                )
                if found.detected and found.loss is not None:
                    written = await self._write(
                        stored, loss=found.loss, entry=loss_entry(found.loss)
                    )
                elif found.loss is None and found.marker is not None:
                    entry = marked_entry(found.marker) if found.created else None
                    written = await self._write(stored, marker=found.marker, entry=entry)
                else:
                    return found  # a loss stands: nothing to write
                if written:
                    return found
        raise _contended("check_marker")

    async def record_loss(self, kind: LossKind, detail: str) -> Loss:
        with translated("record_loss"):
            for _ in range(MAX_ATTEMPTS):
                stored = await self._stored()
                if stored.loss is not None:
                    return stored.loss
                epochs = (stored.marker.epoch,) if stored.marker is not None else ()
                loss = Loss(fresh_id(), stored.now_ms, kind, epochs, detail)
                if await self._write(stored, loss=loss, entry=loss_entry(loss)):
                    return loss
        raise _contended("record_loss")

    async def acknowledge_loss(self, loss_id: str, actor: str, note: str) -> Marker | None:
        with translated("acknowledge_loss"):
            for _ in range(MAX_ATTEMPTS):
                stored = await self._stored()
                loss = stored.loss
                if loss is None or loss.loss_id != loss_id:
                    return None
                marker = acknowledged(stored.marker, loss, stored.now_ms, fresh_id())
                entry = acknowledgement_entry(actor, note, loss, marker)
                if await self._write(stored, marker=marker, drop_loss=True, entry=entry):
                    return marker
        raise _contended("acknowledge_loss")

    async def read_store_log(self, limit: int = 100) -> list[AuditEntry]:
        if limit <= 0:
            return []
        entries: Any
        with translated("read_store_log"):
            entries = await self._client.xrevrange(STORE_LOG_KEY, count=limit)
        return [decode_audit("", entry_id, fields) for entry_id, fields in reversed(entries)]

    async def _stored(self) -> _Stored:
        reply: Any = await self._read(keys=_KEYS)
        try:
            return _Stored(
                _marker(_fields(reply[0])),
                _loss(_fields(reply[1])),
                int(reply[2]) == 1,
                int(reply[3]),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise StoreCorrupt(f"the store's marker cannot be decoded: {exc!r}") from exc

    async def _write(
        self,
        stored: _Stored,
        *,
        marker: Marker | None = None,
        loss: Loss | None = None,
        drop_loss: bool = False,
        entry: AuditEntry | None = None,
    ) -> bool:
        read = stored.marker
        written = WriteMarkerArgs(
            read_epoch=read.epoch if read else "",
            read_checks=str(read.checks) if read else "",
            read_loss_id=stored.loss.loss_id if stored.loss else "",
            write_marker=marker is not None,
            marker=NO_MARKER if marker is None else _marker_args(marker),
            loss_action=_loss_action(loss, drop_loss),
            loss=NO_LOSS if loss is None else _loss_args(loss),
            write_log=entry is not None,
            log=NO_LOG_ENTRY if entry is None else _log_args(entry),
            log_limit=LOG_LIMIT,
        )
        args = lua.WRITE_MARKER.argv(written)
        return int(await self._write_script(keys=_KEYS, args=args)) == 1


def _loss_action(loss: Loss | None, drop_loss: bool) -> str:
    if loss is not None:
        return _WRITE_LOSS
    return _DELETE_LOSS if drop_loss else _KEEP_LOSS


def _marker_args(marker: Marker) -> MarkerArgs:
    replaces = " ".join(marker.replaces)
    return MarkerArgs(marker.epoch, marker.created_ms, marker.checks, replaces)


def _loss_args(loss: Loss) -> LossArgs:
    epochs = " ".join(loss.epochs)
    return LossArgs(loss.loss_id, loss.detected_ms, loss.kind.value, epochs, loss.detail)


def _log_args(entry: AuditEntry) -> LogEntryArgs:
    return LogEntryArgs(
        entry.action, entry.actor, entry.target, entry.before, entry.after, entry.note
    )


def _contended(op: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"redis {op}: the store's marker changed under each of {MAX_ATTEMPTS} attempts in a row"
    )


def _fields(flat: Sequence[bytes]) -> dict[str, str]:
    return {
        name.decode(): value.decode() for name, value in zip(flat[::2], flat[1::2], strict=True)
    }


def _marker(fields: Mapping[str, str]) -> Marker | None:
    if not fields:
        return None
    replaces = tuple(fields[MarkerField.REPLACES].split())
    created_ms, checks = int(fields[MarkerField.CREATED_MS]), int(fields[MarkerField.CHECKS])
    return Marker(fields[MarkerField.EPOCH], created_ms, checks, replaces)


def _loss(fields: Mapping[str, str]) -> Loss | None:
    if not fields:
        return None
    epochs = tuple(fields[LossField.EPOCHS].split())
    kind = LossKind(fields[LossField.KIND])
    detected_ms = int(fields[LossField.DETECTED_MS])
    return Loss(fields[LossField.ID], detected_ms, kind, epochs, fields[LossField.DETAIL])
