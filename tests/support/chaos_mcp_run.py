"""The MCP chaos run (tests/support/chaos_mcp.py's agents): traffic under faults, a calm, a
final repeat of every tool call, then the audit against the MCP server's record of what it sent.

The audit checks "never twice, never lost" in MCP terms: no text was sent twice; every call ends
with its answer (and then it was sent once, and that answer is the one execution's) or with
``outcome-unknown`` and its record in the review queue; every agent that got an answer for a
call got the same one; and every answer came back under its own request's JSON-RPC id, as a
JSON-RPC message.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp

from idemproxy.store.factory import open_store
from tests.support.agents import Answer, Verdict, verdict
from tests.support.audit import record_key
from tests.support.chaos import traffic
from tests.support.chaos_mcp import McpAgent, McpCall, McpJournal
from tests.support.faults import FaultInjector, FaultPlan
from tests.support.fleet import DurableRedis, FleetProxy
from tests.support.mcp_upstream import McpServerProcess

FINAL_TRIES = 40
FINAL_CONCURRENCY = 16


@dataclass(frozen=True)
class McpChaosProfile:
    duration_s: float
    request_budget: int
    agents: int
    fault_plan: FaultPlan
    lease_ms: int
    seed: int = 0


@dataclass
class McpReport:
    calls: int = 0
    applied: int = 0
    duplicates: dict[str, list[int]] = field(default_factory=dict)
    finals: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        self.violations.append(message)


@dataclass
class McpChaosResult:
    report: McpReport
    figures: dict[str, object]


async def run_mcp_chaos(
    server: McpServerProcess,
    proxies: list[FleetProxy],
    redis: DurableRedis | None,
    store_url: str,
    profile: McpChaosProfile,
) -> McpChaosResult:
    started = time.monotonic()
    rng = random.Random(profile.seed)
    journal = McpJournal(budget=profile.request_budget)
    injector = FaultInjector(profile.fault_plan, proxies, redis, profile.seed, store_url=store_url)
    urls = [proxy.url for proxy in proxies]
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        agents = [
            McpAgent(f"a{i}", journal, session, lambda: rng.choice(urls), profile.seed * 100 + i)
            for i in range(profile.agents)
        ]
        await traffic(profile.duration_s, agents, injector, journal.spent)
        await injector.restore()
        # A lease taken just before the calm may still run; it must run out before the repeat.
        await asyncio.sleep(profile.lease_ms / 1000 + 0.5)
        patient = McpAgent(
            "recovery", journal, session, agents[0].pick_proxy, -1,
            sdk_rate=0, max_tries=FINAL_TRIES, backoff_s=0.2,
        )  # fmt: skip
        final = await _final_repeats(patient, journal.calls)
    report = await audit(journal, final, server.sent(), store_url)
    figures: dict[str, object] = {
        "requests": journal.sent,
        "sdk_attempts": dict(journal.sdk_attempts),
        "calls": report.calls,
        "applied_at_server": report.applied,
        "final": dict(sorted(report.finals.items())),
        "outcomes": dict(journal.outcomes.most_common()),
        "faults_injected": dict(sorted(injector.injected.items())),
        "duplicates_found": len(report.duplicates),
        "violations": len(report.violations),
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    return McpChaosResult(report, figures)


async def _final_repeats(patient: McpAgent, calls: list[McpCall]) -> dict[McpCall, Answer]:
    """Every tool call once more, to its final answer, as a recovery run would."""
    limit = asyncio.Semaphore(FINAL_CONCURRENCY)

    async def repeat(call: McpCall) -> tuple[McpCall, Answer]:
        async with limit:
            return call, await patient.call(call)

    return dict(await asyncio.gather(*(repeat(call) for call in dict.fromkeys(calls))))


async def audit(
    journal: McpJournal, final: dict[McpCall, Answer], sent: dict[str, list[int]], store_url: str
) -> McpReport:
    report = McpReport(calls=len(final), applied=sum(len(ids) for ids in sent.values()))
    report.duplicates = {text: ids for text, ids in sent.items() if len(ids) > 1}
    for text, ids in report.duplicates.items():
        report.fail(f"{text} sent {len(ids)} times: executions {ids}")
    for text in sent.keys() - {call.text for call in final}:
        report.fail(f"the server sent {text}, which no agent asked for")
    for problem in journal.wrong_ids[:20]:
        report.fail(f"an answer under another id: {problem}")
    for problem in journal.not_rpc[:20]:
        report.fail(f"an answer that is no JSON-RPC message: {problem}")
    store = open_store(store_url)
    try:
        for call, answer in final.items():
            final_verdict = verdict(answer.status, answer.outcome)
            report.finals[final_verdict.value] += 1
            executions = sent.get(call.text, [])
            if final_verdict is Verdict.DONE and answer.upstream_id not in executions[:1]:
                report.fail(f"{call.text}: answered {answer.upstream_id}, executions {executions}")
            elif final_verdict is Verdict.UNKNOWN:
                key = record_key(answer)
                unknown = await store.list_unknown(call.agent, limit=1_000_000)
                if key not in {record.key for record in unknown}:
                    report.fail(f"{call.text}: unknown, but {key} is not listed for review")
            elif final_verdict is not Verdict.DONE:
                report.fail(f"{call.text}: the final repeat got {answer.status} {answer.outcome}")
            done = {
                a.upstream_id
                for a in journal.answers.get(call, [])
                if verdict(a.status, a.outcome) is Verdict.DONE
            }
            if len(done) > 1:
                report.fail(f"{call.text}: agents got different answers {sorted(map(str, done))}")
    finally:
        await store.close()
    return report
