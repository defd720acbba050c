"""Delivery of effect events to the recovery controller: at least once, in order per agent.

Events wait in the store's outbox; each agent's delivery cursor (in the store too) says which
the controller has accepted. A pass over the agents on delivery's worklist (store/work.py: those
with events waiting or records that will emit some) POSTs each agent's next events, oldest
first, in one signed batch and moves the cursor past them only once the controller answered
2xx. A proxy that stops mid-delivery therefore re-sends that batch when it (or another proxy)
takes over: the controller deduplicates by ``event_id``.

A failed POST is retried with exponential backoff and full jitter; after ``attempts`` failures
the agent's delivery is parked: nothing more is sent for it (later events would overtake the
stuck ones) until an operator retries it. Parked events stay in the outbox and in the backlog.

Only one proxy delivers an agent's events at a time: it holds a lease on the cursor, written by
compare-and-set, and renews it with each acknowledgement.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import orjson

from idemproxy import __version__
from idemproxy.config.settings import ControllerConfig
from idemproxy.ledger import documents, signature
from idemproxy.metrics import Metrics
from idemproxy.store.clock import wall_ms
from idemproxy.store.errors import StoreError
from idemproxy.store.journal import DeliveryCursor
from idemproxy.store.protocols import Store
from idemproxy.store.records import EffectEvent
from idemproxy.store.work import Work

log = logging.getLogger(__name__)

# A lease outlives a POST that runs into its timeout several times over, so a slow controller
# never lets a second proxy start on the same events while the first still waits.
LEASE_TIMEOUTS = 3


class Result(StrEnum):
    """The ``result`` label of ``idemproxy_controller_events_total``, counted per event."""

    DELIVERED = "delivered"  # the controller accepted it
    FAILED = "failed"  # a POST carrying it failed (it will be retried)
    PARKED = "parked"  # attempts ran out while it waited


@dataclass(frozen=True, slots=True)
class Posted:
    """The controller's answer to one POST: its status, 0 if none came (and why)."""

    status: int
    detail: str = ""

    @property
    def accepted(self) -> bool:
        return 200 <= self.status < 300


class Transport(Protocol):
    """Sends one signed delivery to the controller."""

    async def post(self, body: bytes, headers: Mapping[str, str]) -> Posted: ...


def default_owner() -> str:
    """Names this process in cursors, so operators see who holds a delivery lease."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Delivery:
    """The delivery loop of one proxy process."""

    def __init__(
        self,
        store: Store,
        transport: Transport,
        settings: ControllerConfig,
        metrics: Metrics,
        *,
        owner: str | None = None,
        clock_ms: Callable[[], int] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        assert settings.secret is not None, "config refuses a controller url without a secret"
        self._store = store
        self._transport = transport
        self._settings = settings
        self._secret = settings.secret.get_secret_value()
        self._metrics = metrics
        self.owner = owner or default_owner()
        self._clock_ms = clock_ms or wall_ms
        self._jitter = jitter
        self._lease_ms = int(settings.timeout_s * LEASE_TIMEOUTS * 1000)
        # Agent -> until when its cursor may carry this process's lease. A lapsed lease needs no
        # release, so entries are dropped as they lapse: it holds only the agents of the moment.
        self._lease_holds: dict[str, int] = {}

    async def run(self) -> None:
        """Deliver until cancelled; a pass that leaves work behind is followed at once."""
        try:
            await self._loop()
        finally:
            with contextlib.suppress(StoreError):
                await self.release()

    async def release(self) -> None:
        """Give up this process's leases, so a successor need not wait for them to run out."""
        for agent in sorted(self._lease_holds):
            cursor = await self._store.read_cursor(agent)
            if cursor.owner == self.owner:
                released = dataclasses.replace(cursor, owner="", lease_expires_ms=0)
                await self._store.write_cursor(agent, released)
        self._lease_holds.clear()

    async def _loop(self) -> None:
        while True:
            try:
                busy = await self.deliver_once()
            except StoreError as exc:
                log.warning("delivery paused: store unavailable", extra={"reason": str(exc)})
                busy = False
            except Exception:
                # Delivery must outlive a bug in one pass: the events wait in the outbox.
                log.exception("delivery pass failed")
                busy = False
            if not busy:
                await asyncio.sleep(self._settings.poll_interval_s)

    async def deliver_once(self) -> bool:
        """One pass over the agents on delivery's worklist; True if an agent has more events
        waiting right now."""
        now_ms = self._clock_ms()
        self._lease_holds = {a: until for a, until in self._lease_holds.items() if until > now_ms}
        backlog, busy = 0, False
        agents = await self._store.list_busy_agents(Work.DELIVERY)
        for agent in agents:
            waiting, more = await self._deliver_agent(agent)
            backlog += waiting
            busy = busy or more
        self._metrics.controller_backlog.set(backlog)
        self._metrics.agents_busy.labels(Work.DELIVERY).set(len(agents))
        return busy

    async def _deliver_agent(self, agent: str) -> tuple[int, bool]:
        """Deliver the agent's next batch if it is due; (events still waiting, more now)."""
        now_ms = self._clock_ms()
        cursor = await self._store.read_cursor(agent)
        after = cursor.acked or None
        held_elsewhere = cursor.owner != self.owner and cursor.lease_expires_ms > now_ms
        if held_elsewhere or cursor.parked or cursor.retry_at_ms > now_ms:
            # Counted all the same: the backlog is the store's, so every worker and every pod
            # reports the same figure (the gauge is read with max across workers).
            return await self._store.count_events(agent, after), False
        events = await self._store.read_events(agent, after, self._settings.batch_size)
        if not events:
            return 0, False
        leased = await self._leased(agent, cursor, now_ms)
        if leased is None:
            return 0, False
        posted = await self._transport.post(*self._signed(agent, events))
        if not posted.accepted:
            return await self._failed(agent, leased, events, posted), False
        acked = dataclasses.replace(
            leased,
            acked=events[-1].event_id,
            attempts=0,
            retry_at_ms=0,
            last_error="",
            lease_expires_ms=self._clock_ms() + self._lease_ms,
        )
        self._lease_holds[agent] = acked.lease_expires_ms
        if await self._store.write_cursor(agent, acked) is None:
            log.warning(
                "delivery lease lost; the batch will be delivered again", extra={"agent": agent}
            )
            return 0, False
        self._metrics.controller_events.labels(Result.DELIVERED).inc(len(events))
        if len(events) < self._settings.batch_size:
            return 0, False
        return await self._store.count_events(agent, acked.acked), True

    async def _leased(
        self, agent: str, cursor: DeliveryCursor, now_ms: int
    ) -> DeliveryCursor | None:
        """The cursor with this process's lease on it, written only when it needs renewing."""
        if cursor.owner == self.owner and cursor.lease_expires_ms - now_ms > self._lease_ms // 2:
            return cursor
        renewed = dataclasses.replace(
            cursor, owner=self.owner, lease_expires_ms=now_ms + self._lease_ms
        )
        self._lease_holds[agent] = renewed.lease_expires_ms
        return await self._store.write_cursor(agent, renewed)

    def _signed(self, agent: str, events: list[EffectEvent]) -> tuple[bytes, dict[str, str]]:
        body = orjson.dumps({"agent": agent, "events": [documents.event(e) for e in events]})
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"idemproxy/{__version__}",
            **signature.signed_headers(self._secret, body),
        }
        return body, headers

    async def _failed(
        self, agent: str, cursor: DeliveryCursor, events: list[EffectEvent], posted: Posted
    ) -> int:
        """Back off, or park once the attempts ran out; returns the events still waiting."""
        attempts = cursor.attempts + 1
        error = f"controller answered {posted.status}" if posted.status else posted.detail
        now_ms = self._clock_ms()
        self._metrics.controller_events.labels(Result.FAILED).inc(len(events))
        waiting = await self._store.count_events(agent, cursor.acked or None)
        if attempts >= self._settings.attempts:
            failed = dataclasses.replace(
                cursor, attempts=attempts, last_error=error, parked_ms=now_ms, lease_expires_ms=0
            )
            self._metrics.controller_events.labels(Result.PARKED).inc(waiting)
            log.error(
                "delivery parked after %d attempts; retry with `idemproxy delivery retry %s`",
                attempts,
                agent,
                extra={"agent": agent, "reason": error, "waiting": waiting},
            )
        else:
            ceiling_s = min(
                self._settings.max_backoff_s, self._settings.backoff_s * 2 ** (attempts - 1)
            )
            delay_ms = int(self._jitter() * ceiling_s * 1000)
            failed = dataclasses.replace(
                cursor, attempts=attempts, last_error=error, retry_at_ms=now_ms + delay_ms
            )
            log.warning(
                "delivery failed; retrying in %.1f s",
                delay_ms / 1000,
                extra={"agent": agent, "reason": error, "attempt": attempts},
            )
        await self._store.write_cursor(agent, failed)
        return waiting
