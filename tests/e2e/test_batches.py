"""Batches without their ids, end to end: ``idemproxy batches AGENT`` lists a batch with two
completed effects and one in doubt, and ``idemproxy recover AGENT`` without a batch picks it.

Real processes: the fake upstream, ``idemproxy serve`` on SQLite with an admin token, and the
operator CLI against its admin API.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from tests.e2e.test_recovery_context import AGENT_ID, TOKEN, pinned_proxy, run_batch
from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

OLD_BATCH = "batch-old-fine"
BATCH = "batch-in-doubt"


def cli(proxy: ServedProxy, *argv: str) -> tuple[int, str, str]:
    script = Path(sys.executable).parent / "idemproxy"
    done = subprocess.run(
        [str(script), *argv, "--admin-url", proxy.admin_url],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, "IDEMPROXY_ADMIN_TOKEN": TOKEN},
    )
    return done.returncode, done.stdout, done.stderr


def test_batches_lists_the_batch_in_error_and_recover_picks_it(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    proxy = pinned_proxy(tmp_path, upstream)
    with running(proxy):
        with httpx.Client(base_url=proxy.url, timeout=10) as client:
            fine = {"Idem-Batch": OLD_BATCH, "Idem-Tool-Call": "call-1"}
            assert client.post("/up/api/channels/1/messages", json={}, headers=fine).is_success
        run_batch(proxy, BATCH)

        code, out, err = cli(proxy, "batches", AGENT_ID, "--json")
        assert code == 0, err
        listed = orjson.loads(out)["batches"]
        assert [item["batch"] for item in listed] == [BATCH, OLD_BATCH]
        doubt = listed[0]
        assert (doubt["completed"], doubt["unknown"], doubt["strategy"]) == (2, 1, "manual_only")
        assert (doubt["in_error"], doubt["error"]) == (True, "1 unknown outcome(s)")
        assert listed[1]["in_error"] is False

        code, out, err = cli(proxy, "batches", AGENT_ID)
        assert code == 0, err
        assert out.splitlines()[2].split() == [BATCH, "manual_only", "2", "-", "-", "1"]

        # Picked, and refused as a batch in doubt is: its unknown outcome needs a decision.
        code, out, err = cli(proxy, "recover", AGENT_ID)
        assert code == 1
        assert f"recovering batch {BATCH}: the newest of agent {AGENT_ID}'s batches in error" in err
        assert "unknown outcome" in err

        code, out, err = cli(proxy, "recover", AGENT_ID, "--strategy", "abandon", "--json")
        assert code == 0, err
        assert orjson.loads(out)["batch"] == BATCH

        # Abandoned is decided: nothing is in error any more.
        code, out, err = cli(proxy, "recover", AGENT_ID)
        assert code == 1
        assert f"`idemproxy batches {AGENT_ID}`" in err
