"""What an operator sees of a running proxy: its metrics scrape and its log lines."""

from __future__ import annotations

import asyncio
import shutil
from asyncio.subprocess import PIPE, STDOUT
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.support.processes import FakeUpstream, ServedProxy, http_get, running

pytestmark = pytest.mark.e2e

SECRET = "Bearer sk-ops-secret-987"
BODY_MARKER = "body-text-that-must-not-be-logged"


async def drive(proxy: ServedProxy) -> None:
    headers = {"Idem-Batch": "b1", "Idem-Tool-Call": "c1", "Authorization": SECRET}
    body = orjson.dumps({"content": BODY_MARKER})
    async with aiohttp.ClientSession() as session:
        for _ in range(2):  # a first call, then a replay
            async with session.post(f"{proxy.url}/up/messages", data=body, headers=headers) as r:
                assert r.status == 200
        async with session.post(f"{proxy.url}/up/messages", data=body) as r:
            assert r.status == 400
        async with session.get(f"{proxy.url}/nowhere/x") as r:
            assert r.status == 404


async def test_metrics_scrape_passes_promtool_and_counts_what_happened(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run scripts/install-deploy-tools.sh (make dev)"
    upstream = FakeUpstream(tmp_path)
    with running(upstream):
        proxy = ServedProxy(
            tmp_path, "--store", f"sqlite:///{tmp_path}/s.db", "--upstream", f"up={upstream.url}"
        )
        with running(proxy):
            await drive(proxy)
            status, scrape = http_get(proxy.admin_url + "/metrics")
    assert status == 200
    check = await asyncio.create_subprocess_exec(
        promtool, "check", "metrics", stdin=PIPE, stdout=PIPE, stderr=STDOUT
    )
    report, _ = await asyncio.wait_for(check.communicate(scrape), 30)
    assert check.returncode == 0, report.decode()
    text = scrape.decode()
    assert 'idemproxy_requests_total{outcome="forwarded",route="write",upstream="up"} 1.0' in text
    assert 'idemproxy_requests_total{outcome="replayed",route="write",upstream="up"} 1.0' in text
    assert 'outcome="unknown-upstream",route="-",upstream="-"} 1.0' in text
    assert (
        'idemproxy_duplicates_blocked_total{agent="default",kind="replayed",route="write",'
        'upstream="up"} 1.0' in text
    )
    assert 'idemproxy_build_info{version="' in text
    assert "_created" not in text
    assert "b1" not in text  # no batch ids, tool calls or keys in labels


async def test_one_json_access_line_per_request_without_secrets_or_bodies(
    tmp_path: Path,
) -> None:
    upstream = FakeUpstream(tmp_path)
    with running(upstream):
        proxy = ServedProxy(
            tmp_path, "--store", f"sqlite:///{tmp_path}/s.db", "--upstream", f"up={upstream.url}"
        )
        with running(proxy):
            await drive(proxy)
    lines = [orjson.loads(line) for line in proxy.output().splitlines() if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "idemproxy.access"]
    assert [line["outcome"] for line in access] == [
        "forwarded",
        "replayed",
        "missing-idempotency-key",
        "unknown-upstream",
    ]
    first = access[0]
    assert first["upstream"] == "up"
    assert first["route"] == "write"
    assert first["status"] == 200
    assert first["effect_key"].startswith("default/tc:b1:c1:")
    assert first["duration_ms"] >= 0
    assert all(line["level"] in {"info", "warning"} for line in lines)
    log = proxy.output()
    assert "sk-ops-secret" not in log
    assert BODY_MARKER not in log
