"""The atproto SDK through the proxy: one post per tool call, and the client stays on the proxy.

At login the PDS names its own URL in the DID document, and the SDK switches to it; the proxy
rewrites that endpoint to itself, so every later call (and its protection) still goes through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from atproto import Client  # type: ignore[import-untyped]
from atproto_client.exceptions import AtProtocolError  # type: ignore[import-untyped]

from tests.sdk.conftest import Fakes, tool_call
from tests.support.fakes.pds import HANDLE
from tests.support.fakes.service import Fault, Planned
from tests.support.processes import ServedProxy

Login = Callable[[str, dict[str, str]], Client]


@pytest.fixture
def logged_in() -> Iterator[Login]:
    """Fresh SDK clients, as after a crash: each logs in again through the given proxy."""
    clients: list[Client] = []

    def login(proxy_url: str, headers: dict[str, str]) -> Client:
        client = Client(base_url=f"{proxy_url}/bluesky")
        clients.append(client)
        for name, value in headers.items():
            client.request.add_additional_header(name, value)
        client.login(HANDLE, "app-password")
        return client

    yield login
    for client in clients:
        client.request.close()


def posts(fakes: Fakes, run_id: str) -> list[dict[str, Any]]:
    return [r for r in fakes.pds.effects if run_id in r["value"]["text"]]


def via_proxy(fakes: Fakes, path_part: str) -> list[bool]:
    return ["idemproxy" in s.headers.get("Via", "") for s in fakes.pds.seen_on(path_part)]


def test_login_keeps_the_client_on_the_proxy(
    proxy: ServedProxy, fakes: Fakes, logged_in: Login
) -> None:
    client = logged_in(proxy.url, {})

    assert client._base_url == f"{proxy.url}/bluesky/xrpc"
    assert client.me is not None
    assert all(via_proxy(fakes, "getProfile"))


def test_a_rerun_after_a_crash_replays_the_same_post(
    proxy: ServedProxy, fakes: Fakes, run_id: str, logged_in: Login
) -> None:
    first = logged_in(proxy.url, tool_call(run_id)).send_post(f"shipped {run_id}")
    # The restarted agent builds the same post; the SDK stamps it with a new createdAt.
    again = logged_in(proxy.url, tool_call(run_id)).send_post(f"shipped {run_id}")

    assert again.uri == first.uri
    assert again.cid == first.cid
    assert len(posts(fakes, run_id)) == 1
    assert all(via_proxy(fakes, "createRecord"))


def test_a_rerun_worded_anew_posts_nothing_and_says_what_was_posted(
    proxy: ServedProxy, fakes: Fakes, run_id: str, logged_in: Login
) -> None:
    first = logged_in(proxy.url, tool_call(run_id)).send_post(f"shipped {run_id}")
    with pytest.raises(AtProtocolError) as rerun:
        logged_in(proxy.url, tool_call(run_id)).send_post(f"{run_id} has shipped!")

    answer = rerun.value.response
    assert answer.status_code == 409
    problem = answer.content
    assert problem["type"].endswith("/tool-call-already-acted")
    assert problem["external_id"] == first.uri
    assert problem["recorded_answer"]["cid"] == first.cid
    assert len(posts(fakes, run_id)) == 1


def test_an_unknown_create_is_reconciled_by_reading_the_record_back(
    proxy: ServedProxy, fakes: Fakes, run_id: str, logged_in: Login
) -> None:
    fakes.pds.plan("create", Planned(Fault.DROP_AFTER))
    with pytest.raises(AtProtocolError):
        logged_in(proxy.url, tool_call(run_id)).send_post(f"dropped {run_id}")
    assert len(posts(fakes, run_id)) == 1

    rerun = logged_in(proxy.url, tool_call(run_id)).send_post(f"dropped {run_id}")

    assert rerun.uri == posts(fakes, run_id)[0]["uri"]
    assert len(posts(fakes, run_id)) == 1
    assert len(fakes.pds.sent_with(run_id)) == 1  # one create: the proxy read it back instead
    assert len(fakes.pds.seen_on(rerun.uri.rsplit("/", 1)[1])) == 1  # getRecord by its key


def test_a_create_that_never_landed_is_sent_again(
    proxy: ServedProxy, fakes: Fakes, run_id: str, logged_in: Login
) -> None:
    fakes.pds.plan("create", Planned(Fault.DROP_BEFORE))
    with pytest.raises(AtProtocolError):
        logged_in(proxy.url, tool_call(run_id)).send_post(f"lost {run_id}")
    assert posts(fakes, run_id) == []

    rerun = logged_in(proxy.url, tool_call(run_id)).send_post(f"lost {run_id}")

    created = posts(fakes, run_id)
    assert len(created) == 1
    assert rerun.uri == created[0]["uri"]
    # Both creates carried the record key derived from the effect key.
    sent = fakes.pds.sent_with(run_id)
    assert len(sent) == 2
    assert {orjson.loads(s.body)["rkey"] for s in sent} == {rerun.uri.rsplit("/", 1)[1]}


def test_a_create_applied_but_answered_500_is_read_back_not_failed(
    proxy: ServedProxy, fakes: Fakes, run_id: str, logged_in: Login
) -> None:
    fakes.pds.plan("create", Planned(Fault.FAIL_AFTER))

    created = logged_in(proxy.url, tool_call(run_id)).send_post(f"once {run_id}")

    stored = posts(fakes, run_id)
    assert len(stored) == 1
    assert (created.uri, created.cid) == (stored[0]["uri"], stored[0]["cid"])
    assert len(fakes.pds.seen_on(created.uri.rsplit("/", 1)[1])) == 1  # getRecord by its key


def test_a_create_at_a_key_another_record_holds_fails_and_is_not_applied(
    proxy: ServedProxy, fakes: Fakes, run_id: str, logged_in: Login
) -> None:
    client = logged_in(proxy.url, tool_call(f"{run_id}-earlier"))
    profile = "app.bsky.actor.profile"
    theirs = {"$type": profile, "displayName": f"theirs {run_id}"}
    client.com.atproto.repo.create_record(
        {"repo": client.me.did, "collection": profile, "rkey": f"p{run_id}", "record": theirs}
    )
    agent = logged_in(proxy.url, tool_call(run_id))
    mine = {**theirs, "displayName": f"mine {run_id}"}

    # The PDS answers 500 (the key is taken); the record the read-back finds is not this one.
    with pytest.raises(AtProtocolError) as refused:
        agent.com.atproto.repo.create_record(
            {"repo": client.me.did, "collection": profile, "rkey": f"p{run_id}", "record": mine}
        )

    assert refused.value.response.status_code == 500
    assert refused.value.response.headers["idem-outcome"] == "forwarded"
    held = [r for r in fakes.pds.records.values() if run_id in str(r["value"])]
    assert [r["value"]["displayName"] for r in held] == [f"theirs {run_id}"]
