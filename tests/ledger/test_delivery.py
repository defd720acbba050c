"""Delivery to a real (in-process) controller: signed, in order, at least once, parked at last."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from aiohttp import ClientSession

from idemproxy.admin.background import WebhookTransport
from idemproxy.config.settings import ControllerConfig
from idemproxy.ledger.delivery import Delivery, Posted
from idemproxy.ledger.service import LedgerService
from idemproxy.metrics import Metrics
from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordState
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.sqlite import SQLiteStore
from tests.ledger.conftest import SECRET, make_effect
from tests.support.controller import Controller


@pytest.fixture(params=["memory", "sqlite", "fakeredis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A store of the test's own: delivery works on every agent the store knows."""
    backend: Store
    if request.param == "memory":
        backend = MemoryStore()
    elif request.param == "sqlite":
        backend = SQLiteStore(tmp_path / "effects.db")
    else:
        backend = RedisStore(fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer()))
    yield backend
    await backend.close()


@pytest.fixture
async def session() -> AsyncIterator[ClientSession]:
    async with ClientSession() as session:
        yield session


def settings(controller: Controller, **overrides: Any) -> ControllerConfig:
    values: dict[str, Any] = {"url": controller.url, "secret": SECRET, "timeout_s": 2.0}
    return ControllerConfig(**(values | overrides))


def delivery(
    store: Store, session: ClientSession, config: ControllerConfig, metrics: Metrics, **kw: Any
) -> Delivery:
    assert config.url is not None
    transport = WebhookTransport(session, config.url, config.timeout_s)
    return Delivery(store, transport, config, metrics, jitter=lambda: 0.0, **kw)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value or 0.0


async def effects(store: Store, agent: str, count: int, batch: str = "b1") -> list[str]:
    """``count`` completed effects (one event each); their effect keys."""
    keys = [
        await make_effect(store, agent, batch, f"c{i}", RecordState.COMPLETED) for i in range(count)
    ]
    return [str(key) for key in keys]


async def drain(courier: Delivery, passes: int = 20) -> None:
    for _ in range(passes):
        if not await courier.deliver_once():
            return


async def test_events_arrive_signed_and_in_order_per_agent(
    store: Store, controller: Controller, session: ClientSession
) -> None:
    expected = {agent: await effects(store, agent, 5) for agent in ("bot-a", "bot-b")}
    metrics = Metrics()
    courier = delivery(store, session, settings(controller, batch_size=2), metrics)

    await drain(courier)

    for agent, keys in expected.items():
        assert [event["effect_key"] for event in controller.events(agent)] == keys
        assert all(event["type"] == "effect.completed" for event in controller.events(agent))
        cursor = await store.read_cursor(agent)
        assert cursor.acked == controller.events(agent)[-1]["event_id"]
    assert all(d.verified for d in controller.accepted)
    assert max(len(d.events) for d in controller.accepted) == 2
    assert sample(metrics, "idemproxy_controller_events_total", result="delivered") == 10
    assert sample(metrics, "idemproxy_controller_backlog", store_scope="pod") == 0
    assert not await courier.deliver_once()  # nothing left: no more POSTs
    assert len(controller.accepted) == 6


async def test_refused_deliveries_back_off_and_are_retried(
    store: Store, controller: Controller, session: ClientSession
) -> None:
    keys = await effects(store, "bot", 3)
    controller.refuse_next = 3
    metrics = Metrics()
    courier = delivery(store, session, settings(controller), metrics)

    for _ in range(3):
        await courier.deliver_once()
        cursor = await store.read_cursor("bot")
        assert cursor.acked == ""
        assert "503" in cursor.last_error
    assert sample(metrics, "idemproxy_controller_backlog", store_scope="pod") == 3
    await courier.deliver_once()

    assert [event["effect_key"] for event in controller.events("bot")] == keys
    assert (await store.read_cursor("bot")).attempts == 0
    assert sample(metrics, "idemproxy_controller_events_total", result="failed") == 9
    assert sample(metrics, "idemproxy_controller_backlog", store_scope="pod") == 0


async def test_the_backoff_waits_with_full_jitter(
    store: Store, controller: Controller, session: ClientSession
) -> None:
    await effects(store, "bot", 1)
    controller.refuse_next = 10
    now_ms = [1_000_000]
    config = settings(controller, backoff_s=2.0, max_backoff_s=5.0)
    transport = WebhookTransport(session, controller.url, 2.0)
    courier = Delivery(
        store, transport, config, Metrics(), clock_ms=lambda: now_ms[0], jitter=lambda: 1.0
    )
    delays = []
    for _ in range(4):
        await courier.deliver_once()
        cursor = await store.read_cursor("bot")
        delays.append(cursor.retry_at_ms - now_ms[0])
        await courier.deliver_once()  # not due yet: nothing is sent
        now_ms[0] = cursor.retry_at_ms
    assert delays == [2000, 4000, 5000, 5000]  # base * 2**n up to the cap (jitter at its top)
    assert controller.refused == 4


async def test_attempts_run_out_then_delivery_parks_until_retried(
    store: Store, controller: Controller, session: ClientSession
) -> None:
    keys = await effects(store, "bot", 2)
    controller.refuse_next = 100
    metrics = Metrics()
    courier = delivery(store, session, settings(controller, attempts=3), metrics)
    for _ in range(5):
        await courier.deliver_once()
    assert controller.refused == 3
    cursor = await store.read_cursor("bot")
    assert cursor.parked
    assert cursor.attempts == 3
    assert sample(metrics, "idemproxy_controller_events_total", result="parked") == 2
    keys += await effects(store, "bot", 1, batch="b2")  # waits behind the parked ones
    await courier.deliver_once()
    assert sample(metrics, "idemproxy_controller_backlog", store_scope="pod") == 3
    assert controller.refused == 3

    controller.refuse_next = 0
    service = LedgerService(store)
    status = (await service.deliveries("bot"))["agents"][0]
    assert (status["parked"], status["backlog"]) == (True, 3)
    await service.retry_delivery("bot", "alice", "controller fixed")
    await drain(courier)

    assert [event["effect_key"] for event in controller.events("bot")] == keys
    assert sample(metrics, "idemproxy_controller_backlog", store_scope="pod") == 0
    [entry] = await store.read_audit("bot")
    assert (entry.action, entry.actor, entry.note) == (
        "delivery.retry",
        "alice",
        "controller fixed",
    )
    assert entry.before.startswith("parked after 3 attempts: controller answered 503")


class CutOffAfterPosting:
    """A transport whose process dies right after the controller took the POST: no ack."""

    def __init__(self, inner: WebhookTransport) -> None:
        self.inner = inner

    async def post(self, body: bytes, headers: Mapping[str, str]) -> Posted:
        await self.inner.post(body, headers)
        raise asyncio.CancelledError


async def test_a_successor_resumes_after_a_crash_and_redelivers_the_unacked_batch(
    store: Store, controller: Controller, session: ClientSession
) -> None:
    keys = await effects(store, "bot", 3)
    config = settings(controller, batch_size=2)
    transport = WebhookTransport(session, controller.url, config.timeout_s)
    first = Delivery(store, transport, config, Metrics(), owner="first")
    await first.deliver_once()  # events 1-2 acknowledged
    first._transport = CutOffAfterPosting(transport)
    with pytest.raises(asyncio.CancelledError):
        await first.deliver_once()  # event 3 reached the controller, the ack never happened
    keys += await effects(store, "bot", 1, batch="b2")

    now_ms = (await store.read_cursor("bot")).lease_expires_ms + 1  # the crashed lease ran out
    successor = Delivery(store, transport, config, Metrics(), owner="next", clock_ms=lambda: now_ms)
    await drain(successor)

    # At least once: the batch in doubt comes again, then the stream goes on in order.
    assert [event["effect_key"] for event in controller.events("bot")] == [*keys[:3], *keys[2:]]
    assert len(controller.event_ids("bot")) == 4


async def test_a_stopped_process_hands_its_lease_over_at_once(
    store: Store, controller: Controller, session: ClientSession
) -> None:
    await effects(store, "bot", 1)
    config = settings(controller)
    first = delivery(store, session, config, Metrics(), owner="first")
    await first.deliver_once()
    assert (await store.read_cursor("bot")).owner == "first"
    task = asyncio.create_task(first.run())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await store.read_cursor("bot")).owner == ""
    await effects(store, "bot", 1, batch="b2")
    await delivery(store, session, config, Metrics(), owner="next").deliver_once()
    assert len(controller.events("bot")) == 2


async def test_two_processes_never_deliver_one_agents_events_at_once(
    store: Store, controller: Controller, session: ClientSession
) -> None:
    keys = await effects(store, "bot", 6)
    controller.delay_s = 0.05
    config = settings(controller, batch_size=2)
    couriers = [delivery(store, session, config, Metrics(), owner=f"p{i}") for i in range(2)]
    for _ in range(6):
        await asyncio.gather(*(courier.deliver_once() for courier in couriers))
    assert [event["effect_key"] for event in controller.events("bot")] == keys


async def test_a_lease_that_ran_out_is_not_handed_over_again(
    store: Store, controller: Controller, session: ClientSession
) -> None:
    await effects(store, "bot", 1)
    now_ms = [1_000_000]
    courier = delivery(store, session, settings(controller), Metrics(), clock_ms=lambda: now_ms[0])
    await courier.deliver_once()
    cursor = await store.read_cursor("bot")
    assert cursor.owner == courier.owner
    now_ms[0] = cursor.lease_expires_ms + 1  # nothing more to deliver, and the lease ran out

    await courier.deliver_once()
    await courier.release()

    # A process that delivered for many agents once does not visit each of them on the way out.
    assert await store.read_cursor("bot") == cursor
