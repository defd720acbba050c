"""The worklist contract (store/work.py) every backend keeps: an agent with work of a kind is on
that kind's worklist, through any number of forgets, and one with none left can be forgotten.

Each test runs against memory, SQLite, fakeredis and (marked ``redis``) the real redis-server.
The Redis store keeps an idle agent listed for its listing grace after a proxy listed it; the
fixture's fakeredis store has none (no other proxy shares its server), the real one keeps its
default, so there only the first half of each test holds.
"""

from __future__ import annotations

from idemproxy.store.control import Pause, PauseOrigin, PauseRequest
from idemproxy.store.journal import AuditEntry, DeliveryCursor
from idemproxy.store.protocols import Store
from idemproxy.store.records import Claimed, RecordKey, RecordState, Settlement
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.work import Work
from tests.store.test_contract import claim_request, completed


def forgets_at_once(store: Store) -> bool:
    """Whether :meth:`Store.forget_agents` drops an agent as soon as it has nothing left."""
    return not isinstance(store, RedisStore) or store.agents.listing_grace_s == 0


async def busy(store: Store, ns: str, work: Work) -> list[str]:
    """This test's agents on the worklist (a shared Redis holds other tests' agents too)."""
    return [agent for agent in await store.list_busy_agents(work) if agent.startswith(ns)]


async def deliver_all(store: Store, agent: str) -> None:
    """Move the agent's cursor past its last event, as a delivery the controller accepted."""
    events = await store.read_events(agent)
    cursor = await store.read_cursor(agent)
    assert await store.write_cursor(
        agent, DeliveryCursor(events[-1].event_id, version=cursor.version)
    )


async def settled(store: Store, agent: str) -> RecordKey:
    """One completed effect of the agent: its record settled, its event not yet delivered."""
    key = RecordKey(agent, "e1")
    await store.claim(claim_request(key))
    await store.settle(key, 1, completed())
    return key


def audit(agent: str, action: str) -> AuditEntry:
    return AuditEntry(agent=agent, action=action, actor="alice", target=agent)


async def test_a_record_in_flight_keeps_its_agent_on_both_worklists(store: Store, ns: str) -> None:
    await store.claim(claim_request(RecordKey(ns, "e1")))
    for _ in range(2):
        assert await busy(store, ns, Work.REVIEW) == [ns]
        assert await busy(store, ns, Work.DELIVERY) == [ns]
        await store.forget_agents()


async def test_a_record_awaiting_review_keeps_its_agent_on_both_worklists(
    store: Store, ns: str
) -> None:
    key = RecordKey(ns, "e1")
    await store.claim(claim_request(key))
    await store.settle(key, 1, Settlement(RecordState.UNKNOWN, reason="no answer", ttl_s=600))
    await store.forget_agents()
    assert await busy(store, ns, Work.REVIEW) == [ns]
    assert await busy(store, ns, Work.DELIVERY) == [ns]


async def test_events_keep_an_agent_on_deliverys_worklist_until_delivered(
    store: Store, ns: str
) -> None:
    await settled(store, ns)
    await store.forget_agents()
    assert await busy(store, ns, Work.DELIVERY) == [ns]
    if forgets_at_once(store):
        assert await busy(store, ns, Work.REVIEW) == []

    await deliver_all(store, ns)
    await store.forget_agents()
    if forgets_at_once(store):
        assert await busy(store, ns, Work.DELIVERY) == []


async def test_a_pause_keeps_its_agent_on_the_sweeps_worklist(store: Store, ns: str) -> None:
    # An operator may pause an agent that never sent anything.
    pause = Pause(PauseOrigin.OPERATOR, "hands off", "alice")
    paused = await store.write_pause(PauseRequest(ns, 0, pause, audit(ns, "agent.pause")))
    assert paused is not None
    await store.forget_agents()
    assert await busy(store, ns, Work.REVIEW) == [ns]

    assert await store.write_pause(
        PauseRequest(ns, paused.version, None, audit(ns, "agent.resume"))
    )
    await store.forget_agents()
    if forgets_at_once(store):
        assert await busy(store, ns, Work.REVIEW) == []


async def test_a_replay_puts_a_forgotten_agent_back_on_deliverys_worklist(
    store: Store, ns: str
) -> None:
    key = await settled(store, ns)
    await deliver_all(store, ns)
    await store.forget_agents()

    replay = await store.claim(claim_request(key))

    assert not isinstance(replay, Claimed)
    await store.forget_agents()
    assert await busy(store, ns, Work.DELIVERY) == [ns]


async def test_an_agent_with_only_an_audit_log_is_on_no_worklist(store: Store, ns: str) -> None:
    await store.append_audit(audit(ns, "note"))
    assert await busy(store, ns, Work.REVIEW) == []
    assert await busy(store, ns, Work.DELIVERY) == []
