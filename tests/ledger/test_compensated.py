"""Marking an effect its compensation undid: the mark, the answer a repeat gets, and the
compare-and-set that leaves a record alone once it moved on."""

from __future__ import annotations

import orjson

from idemproxy.ledger.compensated import compensated_by, mark_compensated
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordState, Resolution, ResolveRequest
from tests.ledger.conftest import make_effect

UNDO = "bot/tc:b1:compensate%3Ac1:s-0"


async def test_a_marked_effect_answers_409_effect_compensated_and_keeps_its_external_id(
    store: Store, ns: str
) -> None:
    key = await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED, external_id="m-1")
    record = await store.get(key)
    assert record is not None
    assert compensated_by(record) == ""

    assert await mark_compensated(store, record, UNDO, "alice")

    marked = await store.get(key)
    assert marked is not None
    assert (marked.state, compensated_by(marked), marked.external_id) == (
        RecordState.COMPLETED,
        UNDO,
        "m-1",
    )
    assert marked.response is not None
    answer = orjson.loads(marked.response.body)
    assert (marked.response.status, answer["type"], answer["compensation_key"]) == (
        409,
        "https://idemproxy.dev/problems/effect-compensated",
        UNDO,
    )
    assert (await store.read_audit(ns))[-1].action == "effect.compensated"
    assert not await mark_compensated(store, marked, UNDO, "alice")  # marked once


async def test_a_record_that_moved_on_since_it_was_read_is_not_marked(
    store: Store, ns: str
) -> None:
    key = await make_effect(store, ns, "b1", "c1", RecordState.COMPLETED)
    read = await store.get(key)
    assert read is not None
    freed = Resolution(RecordState.NOT_APPLIED, reason="freed")
    await store.resolve(ResolveRequest(key, RecordState.COMPLETED, freed))
    assert not await mark_compensated(store, read, UNDO, "alice")
    now = await store.get(key)
    assert now is not None
    assert now.state is RecordState.NOT_APPLIED
