"""A batch outlives its records through `idemproxy serve`: the archive of outcomes, and the
``retention:`` settings, on SQLite and on a private Redis.

The route keeps its records 2 s; the batch posts two messages and gets a 403. Past the TTL the
records are gone, yet ``batch-status`` (over the admin API and over the store) still lists
each outcome, marked archived, and says a re-run would send the posts again, which a repeat
then does. ``status`` reports the retention the proxy was configured with.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

TTL_S = 2
AGENT = "archive-agent"
BATCH = "batch-7"
POLICY = f"""
name: shortlived
routes: []
default: {{name: post_message, external_id: /id, ttl_s: {TTL_S}, lease_ms: 1000}}
"""
RETENTION = {
    "IDEMPROXY_RETENTION__EVENTS_S": "3600",
    "IDEMPROXY_RETENTION__AUDIT_S": "86400",
    "IDEMPROXY_RETENTION__ARCHIVE_S": "172800",
}


def cli(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    script = Path(sys.executable).parent / "idemproxy"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPROXY_")}
    done = subprocess.run(
        [str(script), *argv],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**clean, **(env or {})},
    )
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "shortlived.yaml"
    path.write_text(POLICY)
    return path


@pytest.fixture
def proxy(
    tmp_path: Path, upstream: FakeUpstream, store_url: str, policy: Path
) -> Iterator[ServedProxy]:
    env = {"IDEMPROXY_UPSTREAMS__UP__READ_TIMEOUT_S": str(TTL_S), **RETENTION}
    served = ServedProxy.for_upstream(tmp_path, upstream.url, policy, store_url, env)
    with running(served):
        yield served


async def post(session: aiohttp.ClientSession, proxy: ServedProxy, path: str, call: str) -> int:
    headers = {"Idem-Agent": AGENT, "Idem-Batch": BATCH, "Idem-Tool-Call": call}
    async with session.post(proxy.url + path, json={"text": call}, headers=headers) as answer:
        await answer.read()
        return answer.status


async def test_batch_status_answers_from_the_archive_once_the_records_expired(
    proxy: ServedProxy, upstream: FakeUpstream, store_url: str
) -> None:
    async with aiohttp.ClientSession() as session:
        assert await post(session, proxy, "/up/channels/1/messages", "call-1") == 200
        assert await post(session, proxy, "/up/channels/2/messages", "call-2") == 200
        assert await post(session, proxy, "/up/status/403", "call-3") == 403
        code, out = cli("batch-status", AGENT, BATCH, "--admin-url", proxy.admin_url, "--json")
        assert code == 0, out
        assert orjson.loads(out)["replay"] == ["call-1", "call-2"]

        await asyncio.sleep(TTL_S + 1)

        for where in (("--admin-url", proxy.admin_url), ("--store", store_url)):
            code, out = cli("batch-status", AGENT, BATCH, *where, "--json")
            assert code == 0, out
            document = orjson.loads(out)
            done = document["completed"]
            assert [(a["tool_call"], a["external_id"], a["archived"]) for a in done] == [
                ("call-1", "1", True),
                ("call-2", "2", True),
            ]
            assert [(a["tool_call"], a["status"], a["archived"]) for a in document["failed"]] == [
                ("call-3", 403, True)
            ]
            assert document["replay"] == []
            assert document["expired"] == ["call-1", "call-2"]
        code, page = cli("batch-status", AGENT, BATCH, "--admin-url", proxy.admin_url)
        assert "3 effect(s) whose records expired are shown from the batch's archive" in page
        assert "a re-run sends again tool calls (their records expired): call-1, call-2" in page

        # What batch-status warns of: the record is gone, so a repeat is a new effect.
        assert len(upstream.effects("messages")) == 2
        assert await post(session, proxy, "/up/channels/1/messages", "call-1") == 200
        assert len(upstream.effects("messages")) == 3


async def test_status_reports_the_configured_retention(proxy: ServedProxy) -> None:
    code, out = cli("status", "--admin-url", proxy.admin_url, "--json")
    assert code == 0, out
    document = orjson.loads(out)
    assert document["retention"] == {"events_s": 3600, "audit_s": 86400, "archive_s": 172800}
    assert document["event_retention_s"] == 3600
    code, page = cli("status", "--admin-url", proxy.admin_url)
    assert "retention: events 1 hour, audit 1 day, archive 2 days" in page.splitlines()


def test_an_archive_kept_shorter_than_the_routes_records_is_refused(
    tmp_path: Path, policy: Path
) -> None:
    policy.write_text(POLICY.replace(f"ttl_s: {TTL_S}", "ttl_s: 86400"))
    argv = ["--upstream", "up=http://127.0.0.1:1", "--policy", f"up={policy}"]
    env = {"IDEMPROXY_RETENTION__ARCHIVE_S": "3600", "IDEMPROXY_STORE": "memory://"}
    code, out = cli("serve", *argv, env=env)
    assert code == 2, out
    assert "retention.archive_s 3600 is shorter than the ttl_s 86400" in out
    assert "IDEMPROXY_RETENTION__ARCHIVE_S) to at least 86400" in out
