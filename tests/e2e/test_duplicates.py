"""``idemproxy duplicates`` against a running ``idemproxy serve``: which agent and batch keep
repeating, summed over the workers whichever one answers."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import orjson
import pytest

from idemproxy.duplicates import PUBLISH_INTERVAL_S
from tests.e2e.test_recovery import cli
from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

AGENT = "notes-bot"


def post(proxy: ServedProxy, batch: str, call: str) -> str:
    """One tool call's effect on a connection of its own; its Idem-Outcome."""
    headers = {"Idem-Batch": batch, "Idem-Tool-Call": call, "Connection": "close"}
    request = urllib.request.Request(
        f"{proxy.url}/up/messages", b'{"content": "hi"}', headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        outcome: str = answer.headers["Idem-Outcome"]
        return outcome


@pytest.mark.parametrize("workers", [1, 2])
def test_the_summary_names_the_batch_that_keeps_repeating(
    tmp_path: Path, upstream: FakeUpstream, workers: int
) -> None:
    proxy = ServedProxy(
        tmp_path,
        "--upstream", f"up={upstream.url}",
        "--store", f"sqlite:///{tmp_path}/effects.db",
        "--agent-id", AGENT,
        "--workers", str(workers),
    )  # fmt: skip
    with running(proxy):
        outcomes = [post(proxy, "nightly-7", "c1") for _ in range(7)]
        outcomes += [post(proxy, "nightly-6", "c1") for _ in range(2)]
        time.sleep(PUBLISH_INTERVAL_S + 0.5)  # each worker publishes its tally within a second
        code, text = cli("duplicates", "--admin-url", proxy.admin_url, "--json")
        table_code, table = cli("duplicates", "--admin-url", proxy.admin_url)

    assert outcomes.count("forwarded") == 2
    assert code == 0, text
    summary = orjson.loads(text)
    assert summary["blocked"] == 7, (outcomes, summary)
    (agent,) = summary["agents"]
    assert (agent["agent"], agent["kinds"]) == (AGENT, {"replayed": 7})
    assert [(b["batch"], b["blocked"]) for b in agent["batches"]] == [
        ("nightly-7", 6),
        ("nightly-6", 1),
    ]
    assert agent["top_routes"] == [{"upstream": "up", "route": "write", "blocked": 7}]
    assert table_code == 0, table
    assert "7 repeat(s) blocked" in table
    row = next(line for line in table.splitlines() if line.startswith(f"{AGENT}  nightly-7"))
    assert row.split()[2:5] == ["6", "replayed", "6"]
    assert "up/write (6)" in row
    assert max(len(line) for line in table.splitlines()) <= 100


def test_the_summary_is_not_looked_for_in_a_store(tmp_path: Path) -> None:
    store = tmp_path / "effects.db"
    code, text = cli("duplicates", "--store", f"sqlite:///{store}")

    assert code == 2
    assert "counted by the running proxy" in text
    assert "--admin-url" in text
    assert not store.exists()
