"""The audit log holds every outcome the proxy changed itself and every attempt it refused that
matters, through a real ``idemproxy serve`` on SQLite and the CLI as a subprocess: a key sent
again with another request, a forged compensation, a create lost and then read back, an append
found already present, a lease whose proxy died swept unknown, and ``recover`` (auto) audited
as the strategy it picked."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from idemproxy.store.factory import open_store
from idemproxy.store.records import ClaimRequest, EffectMeta, RecordKey
from tests.e2e.test_recovery import cli
from tests.support.fakes.memory import MEMORY, MemoryService, build_memory_app
from tests.support.fakes.pds import PDS, PdsService, build_pds_app
from tests.support.fakes.service import Fault, Planned
from tests.support.fakes.serving import BackgroundServers
from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT = "audited-bot"
MEMORY_POLICY = """
name: memory
routes:
  - name: read
    match: {methods: [GET]}
    effect: safe
  - name: append_block
    match: {methods: [POST], path: "/v1/blocks/{block_id}/append"}
    append: {read: "/v1/blocks/{path.block_id}", value: /value, content: /text}
default: {name: write}
"""
GENERIC_POLICY = (
    "name: generic\nroutes:\n  - name: read\n    match: {methods: GET}\n    effect: safe\n"
    "default: {name: post_message, external_id: /id}\n"
)
POST = orjson.dumps(
    {
        "repo": "did:plc:agent",
        "collection": "app.bsky.feed.post",
        "record": {"text": "hello", "createdAt": "2026-01-01T00:00:00Z"},
    }
)


@pytest.fixture
def fakes() -> Iterator[tuple[str, MemoryService, str, PdsService]]:
    servers = BackgroundServers()
    servers.start()
    try:
        memory, pds = build_memory_app(), build_pds_app(gzip=False)
        yield servers.serve(memory), memory[MEMORY], servers.serve(pds), pds[PDS]
    finally:
        servers.stop()


def send(url: str, body: bytes, **headers: str) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url, body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def audit(store: str) -> list[dict[str, Any]]:
    code, output = cli("audit", AGENT, "--store", store, "--json")
    assert code == 0, output
    entries: list[dict[str, Any]] = orjson.loads(output)["entries"]
    return entries


def wait_for_action(store: str, action: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [entry for entry in audit(store) if entry["action"] == action]
        if found:
            return found[-1]
        time.sleep(0.2)
    raise AssertionError(f"no {action} entry in {audit(store)}")


async def claim_and_die(store_url: str) -> RecordKey:
    """What a proxy that died holding a request leaves: an in-flight record, lease lapsing."""
    store = open_store(store_url, create=False)
    key = RecordKey(AGENT, "tc:batch-9:call-1:d-0")
    meta = EffectMeta("batch-9", "call-1", "post_message", "up", "POST", "/api/messages")
    await store.claim(ClaimRequest(key, "fp", meta, lease_ms=100, ttl_s=600))
    await store.close()
    return key


def test_every_outcome_the_proxy_changed_and_every_refusal_is_in_the_audit_log(
    tmp_path: Path, upstream: FakeUpstream, fakes: tuple[str, MemoryService, str, PdsService]
) -> None:
    memory_url, memory, pds_url, pds = fakes
    (tmp_path / "memory.yaml").write_text(MEMORY_POLICY)
    (tmp_path / "generic.yaml").write_text(GENERIC_POLICY)
    store = f"sqlite:///{tmp_path}/effects.db"
    proxy = ServedProxy(
        tmp_path,
        "--upstream", f"up={upstream.url}/api",
        "--policy", f"up={tmp_path / 'generic.yaml'}",
        "--upstream", f"mem={memory_url}",
        "--policy", f"mem={tmp_path / 'memory.yaml'}",
        "--upstream", f"bsky={pds_url}",
        "--policy", "bsky=bluesky",
        "--store", store,
        "--agent-id", AGENT,
        env={"IDEMPROXY_RECOVERY__SWEEP_INTERVAL_S": "0.2"},
    )  # fmt: skip
    with running(proxy):
        # A key sent again with another request: refused, and audited.
        json = {"Content-Type": "application/json"}
        keyed = {**json, "Idempotency-Key": '"key-1"'}
        assert send(f"{proxy.url}/up/messages", b'{"a":1}', **keyed)[0] == 200
        status, headers = send(f"{proxy.url}/up/messages", b'{"a":2}', **keyed)
        assert status == 422
        conflict = wait_for_action(store, "effect.conflict_refused")
        assert (conflict["actor"], conflict["target"]) == ("idemproxy", headers["Idem-Key"])

        # A compensation the admin API did not seal.
        forged = {**json, "Idem-Batch": "b1", "Idem-Tool-Call": "c9"}
        forged["Idem-Compensates"] = f"{AGENT}/tc:b1:c1"
        assert send(f"{proxy.url}/up/messages", b"{}", **forged)[0] == 403
        assert wait_for_action(store, "compensation.forged_refused")["after"] == "refused"

        # A create whose answer was lost, read back on the repeat.
        pds.plan("create", Planned(Fault.DROP_AFTER))
        created = {**json, "Idem-Batch": "b2", "Idem-Tool-Call": "post-1"}
        created["Authorization"] = "Bearer token"
        path = f"{proxy.url}/bsky/xrpc/com.atproto.repo.createRecord"
        assert send(path, POST, **created)[0] == 502
        status, headers = send(path, POST, **created)
        assert (status, headers["Idem-Outcome"]) == (200, "reconciled")
        reconciled = wait_for_action(store, "effect.reconciled")
        assert (reconciled["before"], reconciled["after"]) == ("unknown", "completed")
        assert len(pds.effects) == 1

        # An append whose text the value already ends with.
        memory.blocks["notes"] = "- met Ada\n- Ada likes tea\n"
        appended = {**json, "Idem-Batch": "b3", "Idem-Tool-Call": "note-1"}
        body = orjson.dumps({"text": "- Ada likes tea\n"})
        status, headers = send(f"{proxy.url}/mem/v1/blocks/notes/append", body, **appended)
        assert (status, headers["Idem-Append"]) == (200, "present")
        assert wait_for_action(store, "append.present")["after"] == "completed"

        # A proxy died holding a request: the running proxy's sweep turns it unknown.
        lapsed = asyncio.run(claim_and_die(store))
        swept = wait_for_action(store, "effect.lapsed")
        assert (swept["target"], swept["after"]) == (str(lapsed), "unknown")

        # recover with the default strategy (auto): audited as what it picked.
        tool_call = {**json, "Idem-Batch": "b4", "Idem-Tool-Call": "c1"}
        assert send(f"{proxy.url}/up/messages", b'{"b":1}', **tool_call)[0] == 200
        code, output = cli("recover", AGENT, "b4", "--store", store, "--note", "after crash")
        assert code == 0, output
        recovered = wait_for_action(store, "recover.restart")
        assert recovered["after"].startswith("auto picked selective")

        # No entry for the effects that were simply forwarded and settled.
        targets = [entry["target"] for entry in audit(store)]
        assert not any(":b4:" in target for target in targets if target != "b4")
