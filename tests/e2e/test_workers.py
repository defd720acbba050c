"""`idemproxy serve --workers 2`: two proxy processes on one listener, one store between them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.support.processes import FakeUpstream, RedisServer, ServedProxy, http_get, running

pytestmark = pytest.mark.e2e

TOOL_CALL = {"Idem-Batch": "batch-w", "Idem-Tool-Call": "call-w"}


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    with running(server):
        yield server


def two_workers(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer, **env: str
) -> ServedProxy:
    return ServedProxy(
        tmp_path,
        "--upstream",
        f"up={upstream.url}/api",
        "--store",
        redis_server.url,
        "--workers",
        "2",
        env=env,
    )


@pytest.fixture
def proxy(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> Iterator[ServedProxy]:
    """`idemproxy serve --workers 2` on a private Redis, both workers listening."""
    served = two_workers(tmp_path, upstream, redis_server)
    with running(served):
        worker_pids(served)
        yield served


def worker_pids(proxy: ServedProxy) -> list[int]:
    """The pids the supervisor logged, once both workers say they listen."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        lines = [orjson.loads(line) for line in proxy.output().splitlines() if line[:1] == "{"]
        started = [line["pids"] for line in lines if line["msg"] == "started 2 workers"]
        listening = [line for line in lines if line["msg"] == "idemproxy listening"]
        if started and len(listening) == 2:
            pids: list[int] = started[0]
            return pids
        time.sleep(0.05)
    raise AssertionError(f"both workers should be listening by now:\n{proxy.output()}")


def requests_total(admin_url: str) -> float:
    status, body = http_get(admin_url + "/metrics")
    assert status == 200
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.decode().splitlines()
        if line.startswith("idemproxy_requests_total{")
    )


def fresh_connections() -> aiohttp.ClientSession:
    """A connection per request, so the kernel spreads them over both workers."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))


def alive(pid: int) -> bool:
    """Running, not a zombie: a worker orphaned by a kill is reaped by whoever adopts it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def test_both_workers_serve_and_every_scrape_counts_all_of_them(proxy: ServedProxy) -> None:
    pids = worker_pids(proxy)
    assert len(set(pids)) == 2
    assert all(alive(pid) for pid in pids)
    async with fresh_connections() as session:
        for _ in range(40):
            async with session.get(proxy.url + "/up/headers") as response:
                assert response.status == 200
    # Each scrape is a new connection to whichever worker the kernel picks.
    assert [requests_total(proxy.admin_url) for _ in range(6)] == [40.0] * 6


async def test_duplicates_spread_over_workers_make_one_effect(
    proxy: ServedProxy, upstream: FakeUpstream
) -> None:
    async with fresh_connections() as session:

        async def call() -> tuple[int, str, bytes]:
            async with session.post(
                proxy.url + "/up/slow?ms=800", data=b"{}", headers=TOOL_CALL
            ) as response:
                return response.status, response.headers["Idem-Outcome"], await response.read()

        answers = await asyncio.gather(*(call() for _ in range(12)))
    assert len(upstream.effects("/slow")) == 1
    assert {status for status, _, _ in answers} == {200}
    assert len({body for _, _, body in answers}) == 1
    outcomes = sorted(outcome for _, outcome, _ in answers)
    assert outcomes.count("forwarded") == 1
    assert set(outcomes) - {"forwarded"} <= {"coalesced", "replayed"}


async def test_sigterm_drains_every_worker_then_exits_0(proxy: ServedProxy) -> None:
    pids = worker_pids(proxy)
    async with fresh_connections() as session:

        async def call(index: int) -> int:
            headers = {**TOOL_CALL, "Idem-Tool-Call": f"drain-{index}"}
            url = proxy.url + "/up/slow?ms=1000"
            async with session.post(url, data=b"{}", headers=headers) as response:
                return response.status

        pending = asyncio.gather(*(call(index) for index in range(6)))
        await asyncio.sleep(0.4)
        proxy.signal(signal.SIGTERM)
        statuses = await pending
    assert await asyncio.to_thread(proxy.wait) == 0
    assert statuses == [200] * 6
    assert not any(alive(pid) for pid in pids)


async def test_a_worker_that_dies_stops_the_others_and_exits_1(proxy: ServedProxy) -> None:
    first, second = worker_pids(proxy)
    assert proxy.proc is not None
    assert first == proxy.proc.pid  # the serve process is the first worker
    os.kill(second, signal.SIGKILL)
    assert await asyncio.to_thread(proxy.wait) == 1
    assert not alive(second)
    assert "exited with code -9; stopping the others" in proxy.output()


def test_a_worker_left_alone_drains_and_exits(proxy: ServedProxy) -> None:
    _, second = worker_pids(proxy)
    proxy.kill()
    deadline = time.monotonic() + 10
    while alive(second) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(second)
    assert "the first worker is gone; this one drains and exits" in proxy.output()


def test_several_workers_refuse_the_memory_store(tmp_path: Path) -> None:
    served = ServedProxy(
        tmp_path, "--upstream", "up=http://127.0.0.1:1", "--store", "memory://", "--workers", "2"
    )
    result = subprocess.run(served.args, capture_output=True, text=True, timeout=30, env=served.env)
    assert result.returncode == 2
    assert "memory://" in result.stderr
    assert "workers" in result.stderr


def test_metrics_files_a_killed_serve_left_are_removed_at_the_next_start(
    tmp_path: Path, upstream: FakeUpstream, redis_server: RedisServer
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = temp / f"idemproxy-metrics-{gone.pid}-abc123"
    stale.mkdir()
    (stale / "counter_1.db").write_bytes(b"\0" * 1024)
    served = two_workers(tmp_path, upstream, redis_server, TMPDIR=str(temp))
    with running(served):
        worker_pids(served)
        assert served.proc is not None
        assert not stale.exists()
        assert [path.name.split("-")[2] for path in temp.iterdir()] == [str(served.proc.pid)]
        served.signal(signal.SIGTERM)
        assert served.wait() == 0
    assert list(temp.iterdir()) == []
