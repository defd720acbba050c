"""Sessions and accounts through the proxy: the SDK must stay on the proxy after logging in.

An atproto client switches to the PDS its account's DID document names. A PDS that sends the
document with the session (``did_doc_with_session``, as the public entryway does) must have its
PDS endpoint rewritten to the proxy; one that sends none leaves the client where it is. Either
way the writes that follow go through the proxy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from atproto import models  # type: ignore[import-untyped]

from tests.pds.agent import Agent, Agents, Batch
from tests.pds.conftest import started_pds, write_config
from tests.pds.direct import (
    CREATE_ACCOUNT,
    CREATE_RECORD,
    CREATE_SESSION,
    account_body,
    create_account,
    records,
    unique_handle,
)
from tests.support.pds import ReferencePds
from tests.support.pds_relay import PdsRelay
from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

PDS_SERVICE = "#atproto_pds"


@pytest.fixture(scope="module")
def bare_pds(pds_install: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferencePds]:
    """A PDS whose session answers carry no DID document."""
    log_dir = tmp_path_factory.mktemp("bare-pds")
    with started_pds(pds_install, log_dir, did_doc_with_session=False) as started:
        yield started


@pytest.fixture(scope="module")
def bare_proxy(
    bare_pds: ReferencePds, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServedProxy]:
    directory = tmp_path_factory.mktemp("bare-proxy")
    config = write_config(directory, bare_pds.url, f"sqlite:///{directory}/store.db")
    served = ServedProxy(directory, "--config", str(config))
    with running(served):
        yield served


def pds_endpoint(did_doc: dict[str, Any]) -> str:
    """The DID document's ``#atproto_pds`` service endpoint: where the SDK goes next."""
    endpoints = [s["serviceEndpoint"] for s in did_doc["service"] if s["id"].endswith(PDS_SERVICE)]
    assert len(endpoints) == 1, did_doc
    endpoint: str = endpoints[0]
    return endpoint


def create_account_via(agent: Agent, handle: str) -> Any:
    data = models.ComAtprotoServerCreateAccount.Data(**account_body(handle))
    return agent.client.com.atproto.server.create_account(data)


def test_a_session_with_a_did_document_points_the_sdk_at_the_proxy(
    pds: ReferencePds,
    relay: PdsRelay,
    proxy: ServedProxy,
    agents: Agents,
    batch: Batch,
) -> None:
    account = create_account(pds.url)
    agent = agents.start(account, batch.tool_call())

    did_doc = agent.answer(CREATE_SESSION).json()["didDoc"]
    assert pds_endpoint(did_doc) == f"{proxy.url}/bluesky"
    assert agent.pds_endpoint == f"{proxy.url}/bluesky"
    post = agent.client.send_post("after login", profile_identify=account.did)
    answer = agent.answer(CREATE_RECORD)
    assert answer.url.startswith(f"{proxy.url}/bluesky/xrpc/")
    assert answer.outcome == "forwarded"
    assert relay.reached_pds(CREATE_RECORD) == 1
    assert [r["uri"] for r in records(pds.url, account.did)] == [post.uri]


def test_a_session_without_a_did_document_keeps_the_sdk_on_the_proxy(
    bare_pds: ReferencePds, bare_proxy: ServedProxy, agents: Agents, batch: Batch
) -> None:
    account = create_account(bare_pds.url)
    agent = agents.start(account, batch.tool_call(), via=bare_proxy)

    assert "didDoc" not in agent.answer(CREATE_SESSION).json()
    post = agent.client.send_post("after login", profile_identify=account.did)
    answer = agent.answer(CREATE_RECORD)
    assert answer.url.startswith(f"{bare_proxy.url}/bluesky/xrpc/")
    assert answer.outcome == "forwarded"
    assert [r["uri"] for r in records(bare_pds.url, account.did)] == [post.uri]


def test_an_account_created_through_the_proxy_has_its_did_document_pointed_at_the_proxy(
    proxy: ServedProxy, agents: Agents, batch: Batch
) -> None:
    agent = agents.start(None, batch.tool_call())
    made = agent.attempt(lambda: create_account_via(agent, unique_handle()), CREATE_ACCOUNT)

    assert made.status == 200, made
    # This PDS sends the new account's DID document (PDS_ENABLE_DID_DOC_WITH_SESSION).
    assert pds_endpoint(made.json()["didDoc"]) == f"{proxy.url}/bluesky"


def test_a_second_create_account_for_a_handle_is_refused_by_the_pds_not_replayed(
    agents: Agents, batch: Batch
) -> None:
    agent = agents.start(None, batch.tool_call())
    handle = unique_handle()
    first = agent.attempt(lambda: create_account_via(agent, handle), CREATE_ACCOUNT)
    assert first.status == 200, first

    second = agent.attempt(lambda: create_account_via(agent, handle), CREATE_ACCOUNT)

    assert second.outcome != "replayed"
    # What the PDS (0.5.x) answers for a taken handle.
    assert (second.status, second.json().get("error")) == (400, "InvalidRequest"), second
    assert second.json()["message"] == f"Handle already taken: {handle}"
