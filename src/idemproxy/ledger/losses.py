"""The operator's view of the store itself: whether it can keep records, whether it lost some,
and the acknowledgement that lets effects go ahead again after a loss (store/safety.py).

Acknowledging says: what the effects recorded before the loss did was checked at the
upstreams (or is accepted as unknown), and repeats of the effects the store forgot may be sent
again. It is compare-and-set on the loss the operator saw, and the store's log keeps who did
it and why.
"""

from __future__ import annotations

from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.documents import Document, value
from idemproxy.store.protocols import Store
from idemproxy.storeguard import StoreGuard, StoreVerdict

LOG_SHOWN = 20  # newest entries of the store's log in a status


class StoreLosses:
    """Status and acknowledgement, judged by ``guard`` (a running proxy's, or the CLI's own)."""

    def __init__(self, store: Store, guard: StoreGuard) -> None:
        self._store = store
        self._guard = guard

    async def status(self) -> Document:
        return await self._document(await self._guard.check())

    async def acknowledge(self, actor: str, note: str) -> Document:
        verdict = await self._guard.check()
        if verdict.loss is None:
            raise RequestRefused(
                ProblemCode.STATE_CONFLICT,
                "the store has lost no records: there is nothing to acknowledge",
                extra={"store": await self._document(verdict)},
            )
        if await self._store.acknowledge_loss(verdict.loss.loss_id, actor, note) is None:
            raise RequestRefused(
                ProblemCode.STATE_CONFLICT,
                "the store's loss changed while it was being acknowledged: look at it again"
                " (idemproxy store status) and acknowledge what it shows now",
            )
        return await self.status()

    async def _document(self, verdict: StoreVerdict) -> Document:
        loss = verdict.loss
        log = await self._store.read_store_log(LOG_SHOWN)
        return {
            "store": self._store.backend,
            "status": verdict.status.value,
            "reason": verdict.reason,
            "warnings": list(verdict.warnings),
            "durability": value(verdict.durability) if verdict.durability else None,
            "marker": value(verdict.marker) if verdict.marker else None,
            "loss": {**value(loss), "reason": loss.reason} if loss else None,
            "log": [value(entry) for entry in log],
        }
