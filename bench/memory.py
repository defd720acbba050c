"""Resident memory of the proxy while it passes a huge body, a long stream, or many calls."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass

import aiohttp
from procs import rss_mib

SAMPLE_S = 0.02


@dataclass(frozen=True)
class Footprint:
    scenario: str
    baseline_mib: float  # just before the scenario started
    peak_mib: float  # the largest sample while it ran
    seconds: float
    detail: str

    @property
    def growth_mib(self) -> float:
        return self.peak_mib - self.baseline_mib


async def _sampled(pid: int, work: Awaitable[str], scenario: str) -> Footprint:
    baseline = rss_mib(pid)
    peak = baseline
    started = time.monotonic()
    task = asyncio.ensure_future(work)
    while not task.done():
        peak = max(peak, rss_mib(pid))
        await asyncio.sleep(SAMPLE_S)
    detail = task.result()
    return Footprint(scenario, baseline, peak, time.monotonic() - started, detail)


async def _drain(url: str) -> str:
    received = 0
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as answer:
        async for chunk in answer.content.iter_any():
            received += len(chunk)
        return f"HTTP {answer.status}, {received / 1e6:.1f} MB received"


async def _many_calls(url: str, count: int) -> str:
    run = uuid.uuid4().hex[:8]
    connector = aiohttp.TCPConnector(limit=count)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def call(index: int) -> str:
            headers = {"Idem-Batch": f"mem-{run}", "Idem-Tool-Call": f"call-{index}"}
            async with session.post(url, json={"n": index}, headers=headers) as answer:
                await answer.read()
                return f"{answer.status} {answer.headers.get('Idem-Outcome', '')}".strip()

        answers = collections.Counter(
            await asyncio.gather(*(call(index) for index in range(count)))
        )
    return ", ".join(f"{n} x {answer}" for answer, n in answers.most_common())


def footprints(
    pid: int, proxy_url: str, huge_mb: int, sse_events: int, calls: int
) -> list[Footprint]:
    """Run each scenario against the proxy at ``proxy_url`` and sample ``pid``'s memory."""

    async def run_all() -> list[Footprint]:
        return [
            await _sampled(
                pid, _drain(f"{proxy_url}/up/api/huge"), f"{huge_mb} MB response, safe route"
            ),
            await _sampled(
                pid,
                _drain(f"{proxy_url}/up/api/sse?events={sse_events}&gap_ms=0"),
                f"SSE stream of {sse_events} events, safe route",
            ),
            await _sampled(
                pid,
                _many_calls(f"{proxy_url}/up/api/slow?ms=3000", calls),
                f"{calls} concurrent external calls in flight (3 s each)",
            ),
        ]

    return asyncio.run(run_all())
