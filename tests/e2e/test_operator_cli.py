"""The operator verbs against a running `idemproxy serve`, from the console script: what they
say about the admin token, a URL that is not the admin listener, and undelivered events."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.ledger.conftest import SECRET
from tests.support.cli import Ran, idemproxy, json_error
from tests.support.controller import Controller
from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

TOKEN = "admin-token-0123456789abcdef"


async def post_effects(proxy: ServedProxy, count: int) -> None:
    async with aiohttp.ClientSession() as session:
        for n in range(count):
            headers = {"Idem-Batch": "b1", "Idem-Tool-Call": f"c{n}"}
            async with session.post(f"{proxy.url}/up/messages", data=b"{}", headers=headers) as r:
                assert r.status == 200


def test_a_missing_and_a_wrong_token_are_told_apart_in_the_cli_s_terms(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    proxy = ServedProxy(
        tmp_path, "--store", f"sqlite:///{tmp_path}/s.db", "--upstream", f"up={upstream.url}",
        env={"IDEMPROXY_ADMIN_TOKEN": TOKEN},
    )  # fmt: skip
    admin = ("--admin-url", proxy.admin_url)
    with running(proxy):
        missing = idemproxy("status", *admin)
        missing_json = idemproxy("status", *admin, "--json")
        wrong_variable = idemproxy("status", *admin, env={"IDEMPROXY_ADMIN_TOKEN": "wrong"})
        wrong_flag = idemproxy("status", *admin, "--token", "wrong")
        wrong_json = idemproxy("status", *admin, "--token", "wrong", "--json")
        right_flag = idemproxy("status", *admin, "--token", TOKEN)
        right_variable = idemproxy("status", *admin, env={"IDEMPROXY_ADMIN_TOKEN": TOKEN})

    assert missing.returncode == 3
    assert missing.stderr == (
        f"idemproxy: the admin API at {proxy.admin_url} needs its token and none was given:"
        " set IDEMPROXY_ADMIN_TOKEN to the proxy's admin_token, or pass --token\n"
    )
    error = json_error(missing_json)
    assert (error["error"], error["exit_code"]) == ("unauthorized", 3)
    assert wrong_variable.returncode == 3
    assert wrong_variable.stderr == (
        f"idemproxy: the admin API at {proxy.admin_url} refused the token in"
        " IDEMPROXY_ADMIN_TOKEN: it is not the proxy's admin_token\n"
    )
    assert wrong_flag.returncode == 3
    assert "refused the token given with --token" in wrong_flag.stderr
    error = json_error(wrong_json)
    assert (error["error"], error["exit_code"]) == ("unauthorized", 3)
    assert "refused the token given with --token" in error["detail"]
    for ran in (missing, wrong_variable, wrong_flag):
        assert "Authorization" not in ran.stderr
    assert (right_flag.returncode, right_variable.returncode) == (0, 0)
    assert right_flag.stdout.startswith("store sqlite: 0 unknown outcome(s)")


def test_the_proxy_listener_is_told_from_the_admin_listener(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    proxy = ServedProxy(
        tmp_path, "--store", f"sqlite:///{tmp_path}/s.db", "--upstream", f"up={upstream.url}"
    )
    with running(proxy):
        ran = idemproxy("review", "list", "--admin-url", proxy.url)
        as_json = idemproxy("review", "list", "--admin-url", proxy.url, "--json")

    assert ran.returncode == 3
    assert ran.stderr.startswith(f"idemproxy: the server at {proxy.url} is not idemproxy's admin")
    assert "it is the proxy's own listener (listen)" in ran.stderr
    assert "admin_listen, default http://127.0.0.1:9090" in ran.stderr
    assert json_error(as_json)["error"] == "not-admin-api"


async def test_status_without_a_controller_says_events_are_only_kept(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    store = f"sqlite:///{tmp_path}/s.db"
    proxy = ServedProxy(tmp_path, "--store", store, "--upstream", f"up={upstream.url}")
    with running(proxy):
        await post_effects(proxy, 3)
        shown = idemproxy("status", "--admin-url", proxy.admin_url)
        document = orjson.loads(
            idemproxy("status", "--admin-url", proxy.admin_url, "--json").stdout
        )
    on_store = idemproxy("status", "--store", store)

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:2] == [
        "store sqlite: 0 unknown outcome(s) awaiting review, 0 agent(s) paused, 0 agent(s) in"
        " error",
        "events: no recovery controller is configured; 3 event(s) are kept 7 days for the events"
        " API",
    ]
    assert "not yet delivered" not in shown.stdout
    assert lines[3].split() == ["AGENT", "STATE", "ERROR", "UNKNOWN", "EVENTS"]
    assert (document["controller"], document["backlog"]) == ("none", 3)
    assert document["event_retention_s"] == 7 * 86_400
    # The store alone does not say whether a proxy on it delivers events: it says so.
    assert on_store.returncode == 0, on_store.stderr
    assert on_store.stdout.splitlines()[1] == (
        "events: 3 event(s) not accepted by a recovery controller (the store cannot tell if one"
        " is set)"
    )


async def test_status_with_a_controller_counts_what_it_has_not_accepted(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    controller = Controller(SECRET, refuse_next=1_000)
    await controller.start()
    try:
        proxy = ServedProxy(
            tmp_path, "--store", f"sqlite:///{tmp_path}/s.db", "--upstream", f"up={upstream.url}",
            env={"IDEMPROXY_CONTROLLER__URL": controller.url,
                 "IDEMPROXY_CONTROLLER__SECRET": SECRET},
        )  # fmt: skip
        with running(proxy):
            await post_effects(proxy, 2)
            shown: Ran = await asyncio.to_thread(
                idemproxy, "status", "--admin-url", proxy.admin_url
            )
    finally:
        await controller.stop()

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1] == (
        "events: 2 event(s) not yet accepted by the recovery controller, 0 agent(s) with"
        " delivery parked"
    )
    assert lines[3].split() == [
        "AGENT", "STATE", "ERROR", "UNKNOWN", "BACKLOG", "DELIVERY", "LAST", "ERROR",
    ]  # fmt: skip
