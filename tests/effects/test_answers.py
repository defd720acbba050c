"""An effect known to be done is answered alike, whichever way the proxy learned it was done."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestClient

from idemproxy.effects.answers import replay_response
from idemproxy.effects.outcome import Outcome
from idemproxy.store.records import (
    EffectMeta,
    EffectRecord,
    RecordKey,
    RecordState,
    StoredResponse,
)
from tests.effects.test_append import POLICY as APPEND_POLICY
from tests.effects.test_native import bluesky_proxy, create_post
from tests.proxy.conftest import ProxyFactory
from tests.support.fakes.memory import MEMORY, build_memory_app
from tests.support.fakes.service import Fault, Planned

Client = TestClient[web.Request, web.Application]
OUTCOME_HEADERS = ("Idempotent-Replayed", "x-should-retry", "Stripe-Should-Retry")
DONE = {"Idempotent-Replayed": "true", "x-should-retry": "false", "Stripe-Should-Retry": "false"}


def outcome_of(headers: Any) -> dict[str, str]:
    assert "Idem-Key" in headers
    return {name: headers.get(name, "") for name in OUTCOME_HEADERS}


async def test_a_replay_and_every_reconciled_answer_carry_the_same_outcome_headers(
    aiohttp_server: Any, aiohttp_client: Any, make_proxy: ProxyFactory, tmp_path: Path
) -> None:
    client, pds = await bluesky_proxy(aiohttp_server, aiohttp_client, gzip=False)
    await create_post(client)
    replayed = await create_post(client)
    # Answered 500, the create is read back at once and found.
    pds.plan("create", Planned(Fault.FAIL_AFTER))
    read_back = await create_post(client, ("Idem-Tool-Call", "call-2"))
    # Lost, the create is read back by the repeat and found.
    pds.plan("create", Planned(Fault.DROP_AFTER))
    await create_post(client, ("Idem-Tool-Call", "call-3"))
    reconciled = await create_post(client, ("Idem-Tool-Call", "call-3"))

    memory_upstream = await aiohttp_server(build_memory_app())
    memory_upstream.app[MEMORY].blocks["notes"] = "- tea\n"
    policy = tmp_path / "memory.yaml"
    policy.write_text(APPEND_POLICY)
    memory, _ = await make_proxy(
        policy=str(policy), **{"upstreams.up.url": str(memory_upstream.make_url(""))}
    )
    present = await memory.post(
        "/up/v1/blocks/notes/append",
        json={"text": "- tea\n"},
        headers={"Idem-Batch": "batch-1", "Idem-Tool-Call": "call-1"},
    )

    answers = [
        ("replayed", replayed),
        ("reconciled", read_back),
        ("reconciled", reconciled),
        ("reconciled", present),
    ]
    for outcome, answer in answers:
        assert (answer.status, answer.headers["Idem-Outcome"]) == (200, outcome)
        assert outcome_of(answer.headers) == DONE
    assert present.headers["Idem-Append"] == "present"


META = EffectMeta(batch="b", tool_call="t", action="a", upstream="up", method="POST", path="/")


def test_a_record_kept_in_part_says_so_in_its_replay() -> None:
    record = EffectRecord(
        key=RecordKey("bot", "b/t"),
        state=RecordState.COMPLETED,
        fence=1,
        fingerprint="f",
        meta=META,
        response=StoredResponse(200, (), b"{", body_truncated=True),
    )

    answer = replay_response(record, Outcome.REPLAYED)

    assert answer.headers["Idem-Body-Truncated"] == "true"
    assert outcome_of(answer.headers) == DONE


def test_an_effect_resolved_as_applied_without_an_answer_replays_a_note() -> None:
    record = EffectRecord(
        key=RecordKey("bot", "b/t"),
        state=RecordState.COMPLETED,
        fence=1,
        fingerprint="f",
        meta=META,
        external_id="ch_1",
    )

    answer = replay_response(record, Outcome.REPLAYED)

    assert isinstance(answer.body, bytes)
    assert orjson.loads(answer.body)["external_id"] == "ch_1"
    assert outcome_of(answer.headers) == DONE
