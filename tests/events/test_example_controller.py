"""examples/recovery_controller.py, run on the standard library and idemproxy-events alone,
receiving what a real `idemproxy serve` delivers: every event stored once, forgeries refused,
what needs review printed."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from idemproxy.ledger import signature
from tests.events.isolated import example_controller_command
from tests.events.test_package import proxy_event
from tests.support.processes import (
    FakeUpstream,
    Process,
    ServedProxy,
    free_port,
    http_get,
    running,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

SECRET = "example-controller-secret-42"
POLICY = (
    "name: e2e\nroutes:\n  - name: read\n    match: {methods: GET}\n    effect: safe\n"
    "default: {name: write}\n"
)


class ExampleController(Process):
    """The example controller as a process of its own, on a free loopback port."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        args = example_controller_command(
            "--listen", f"127.0.0.1:{self.port}", "--db", str(log_dir / "controller.db")
        )
        env = {**os.environ, "IDEMPROXY_CONTROLLER__SECRET": SECRET}
        super().__init__("controller", args, log_dir, env)

    def start(self) -> None:
        super().start()
        wait_for_port(self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/events"

    def stored(self) -> list[dict[str, Any]]:
        status, body = http_get(self.url)
        assert status == 200, body
        events: list[dict[str, Any]] = json.loads(body)
        return events

    def post(self, body: bytes, headers: dict[str, str]) -> int:
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return error.code


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[FakeUpstream]:
    upstream = FakeUpstream(tmp_path)
    with running(upstream):
        yield upstream


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[ExampleController]:
    controller = ExampleController(tmp_path)
    with running(controller):
        yield controller


async def send(url: str, path: str, tool_call: str) -> dict[str, str]:
    headers = {"Idem-Batch": "batch-1", "Idem-Tool-Call": tool_call}
    async with aiohttp.ClientSession() as session, session.post(url + path, headers=headers) as r:
        await r.read()
        return dict(r.headers)


def wait_for_events(controller: ExampleController, count: int) -> list[dict[str, Any]]:
    """What the controller stored once it holds ``count`` events (or after 20 s)."""
    deadline = time.monotonic() + 20
    stored = controller.stored()
    while len(stored) < count and time.monotonic() < deadline:
        time.sleep(0.1)
        stored = controller.stored()
    return stored


async def test_the_example_controller_stores_what_the_proxy_delivers_once_each(
    tmp_path: Path, upstream: FakeUpstream, controller: ExampleController
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    env = {
        "IDEMPROXY_AGENT_ID": "support-bot",
        "IDEMPROXY_CONTROLLER__URL": controller.url,
        "IDEMPROXY_CONTROLLER__SECRET": SECRET,
    }
    proxy = ServedProxy.for_upstream(
        tmp_path, upstream.url, policy, f"sqlite:///{tmp_path}/store.db", env=env
    )
    with running(proxy):
        first = await send(proxy.url, "/up/messages", "call-1")
        repeat = await send(proxy.url, "/up/messages", "call-1")
        dropped = await send(proxy.url, "/up/drop", "call-2")
        stored = wait_for_events(controller, 4)

    assert repeat["Idem-Outcome"] == "replayed"
    assert dropped["Idem-Outcome"] == "upstream-disconnected"
    assert [(e["type"], e["effect_key"]) for e in stored] == [
        ("effect.completed", first["Idem-Key"]),
        ("effect.replayed", first["Idem-Key"]),
        ("effect.unknown", dropped["Idem-Key"]),
        ("agent.error", dropped["Idem-Key"]),
    ]
    assert stored[0]["status"] == 200
    assert {e["agent"] for e in stored} == {"support-bot"}
    # What needs an operator is said, with the key to resolve.
    assert f"needs review: {dropped['Idem-Key']}" in controller.output()


def test_a_delivery_sent_again_is_stored_once_and_a_forged_one_not_at_all(
    controller: ExampleController,
) -> None:
    body = json.dumps({"agent": "support-bot", "events": [proxy_event()]}).encode()
    headers = {"Content-Type": "application/json", **signature.signed_headers(SECRET, body)}

    assert controller.post(body, headers) == 204
    assert controller.post(body, headers) == 204
    forged = body.replace(b"support-bot", b"other-bot")
    assert controller.post(forged, headers) == 401

    stored = controller.stored()
    assert [(e["agent"], e["event_id"]) for e in stored] == [
        ("support-bot", "00000000000000000007")
    ]
