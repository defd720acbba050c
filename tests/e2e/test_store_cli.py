"""The CLI on a store with no proxy running: a proxy killed while it held a request leaves a
lease that ``idemproxy store sweep`` turns into an unknown outcome in review (audited), and the
verbs follow the proxy's configured ``recovery.actions_per_minute``, read from the same config
file. Real processes: the fake upstream, ``idemproxy serve`` on SQLite, the CLI."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.e2e.test_recovery import cli
from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT = "store-bot"


def held_request(proxy: ServedProxy) -> threading.Thread:
    """The agent's effect the upstream holds for half a minute, sent in the background."""

    def send() -> None:
        headers = {"Idem-Batch": "b1", "Idem-Tool-Call": "c1", "Content-Type": "application/json"}
        request = urllib.request.Request(f"{proxy.url}/up/slow?ms=30000", b"{}", headers)
        # The proxy is killed under it.
        with contextlib.suppress(urllib.error.URLError, ConnectionError):
            urllib.request.urlopen(request, timeout=40).close()

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def json_of(*argv: str) -> Any:
    """The JSON document a verb prints (its log lines go to stderr)."""
    script = Path(sys.executable).parent / "idemproxy"
    done = subprocess.run(
        [str(script), *argv, "--json"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return orjson.loads(done.stdout)


def test_a_store_without_its_proxy_is_swept_and_keeps_the_proxys_rate_limit(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    store = f"sqlite:///{tmp_path}/effects.db"
    config = tmp_path / "idemproxy.yaml"
    config.write_text(f"store: {store}\nagent_id: {AGENT}\nrecovery: {{actions_per_minute: 2}}\n")
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: slow\ndefault: {name: post_message, lease_ms: 500}\n")
    proxy = ServedProxy(
        tmp_path,
        "--config", str(config),
        "--upstream", f"up={upstream.url}/api",
        "--policy", f"up={policy}",
    )  # fmt: skip
    with running(proxy):
        held_request(proxy)
        deadline = time.monotonic() + 10
        while not upstream.effects("/slow") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert upstream.effects("/slow"), "the upstream never got the effect"
        proxy.kill()
    time.sleep(0.7)  # the lease runs out; nobody sweeps

    assert json_of("review", "list", "--store", store)["items"] == []
    swept = json_of("store", "sweep", "--store", store, "--actor", "ops@host")
    assert [item["tool_call"] for item in swept["swept"]] == ["c1"]
    [waiting] = json_of("review", "list", "--store", store)["items"]
    assert waiting["effect_key"] == swept["swept"][0]["effect_key"]
    [entry] = json_of("audit", AGENT, "--store", store)["entries"]
    assert (entry["action"], entry["actor"]) == ("effect.lapsed", "idemproxy")
    assert "swept by ops@host" in entry["note"]
    assert json_of("store", "sweep", "--store", store)["swept"] == []

    acting = ("--store", store, "--config", str(config), "--note", "checking")
    assert cli("agent", "pause", AGENT, *acting)[0] == 0
    assert cli("agent", "resume", AGENT, *acting)[0] == 0
    code, output = cli("agent", "pause", AGENT, *acting)
    assert code == 1
    assert "had 2 recovery actions in the last minute" in output
    # The sweep's entry is the proxy's own, and did not count toward the two.
    assert cli("agent", "pause", AGENT, "--store", store, "--note", "default limit")[0] == 0
