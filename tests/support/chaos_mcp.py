"""MCP traffic under faults: agents' tool calls through proxies that are killed, stopped and
paused, on a Redis that is killed, audited against the MCP server's own record of what it sent.

The MCP server is tests/support/mcp_server.py in session mode, which serves the stateless
revision too. Each tool call is one ``slow_send``
of a text of its own, keyed by its agent, batch and tool call in ``_meta``; every attempt goes
out under a fresh JSON-RPC id, as a restarted client's would. Most attempts are raw JSON-RPC
POSTs shaped as the SDK sends them (fast, and their ids checked on every answer); some are the
official ``mcp.Client`` itself, connecting anew through a proxy picked at random, in the
stateless revision ("auto") or in a session with SSE answers ("legacy"). What an agent
does with an answer is :func:`tests.support.agents.verdict`: the proxy keeps its refusals' HTTP
status and ``Idem-Outcome`` for an MCP client too.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from tests.support.agents import Answer, Verdict, verdict
from tests.support.mcp_agent import Key, connect, stateless_call, stateless_headers
from tests.support.mcp_upstream import MCP_PATH
from tests.support.mcp_wire import RecordingTransport

TOOL = "slow_send"
MAX_SLOW_MS = 300
REQUEST_TIMEOUT_S = 15.0


def write_mcp_config(
    path: Path, server_url: str, *, lease_ms: int, coalesce_wait_ms: int, read_timeout_s: float
) -> Path:
    """A config with the one MCP upstream ``tools``, every tool of it an effect."""
    policy = path.with_name(path.stem + "-policy.yaml")
    policy.write_text(
        "name: tools\nmcp:\n  tools:\n    - {name: read_count, effect: safe}\n"
        "routes:\n  - {name: stream, match: {methods: [GET, DELETE, HEAD, OPTIONS]},"
        " effect: safe}\n"
        f"default: {{name: mcp, effect: external, lease_ms: {lease_ms},"
        f" coalesce_wait_ms: {coalesce_wait_ms}}}\n"
    )
    upstream = f"url: '{server_url}', policy: '{policy}', read_timeout_s: {read_timeout_s}"
    # No pause of an agent after failures: the run fails calls far more often than real life.
    path.write_text(
        f"upstreams:\n  tools: {{{upstream}}}\nshutdown_timeout_s: 2\n"
        "recovery: {pause_after_failures: 0}\n"
    )
    return path


@dataclass(frozen=True, slots=True)
class McpCall:
    agent: str
    batch: str
    call: str

    @property
    def text(self) -> str:
        """What the call sends, its own: the server's record of it names the effect."""
        return f"{self.agent}/{self.batch}/{self.call}"

    @property
    def arguments(self) -> dict[str, Any]:
        return {"text": self.text, "ms": random.Random(self.text).randint(0, MAX_SLOW_MS)}

    def message(self, request_id: str) -> dict[str, Any]:
        meta = {"dev.idemproxy/batch": self.batch, "dev.idemproxy/toolCall": self.call}
        return stateless_call(TOOL, self.arguments, request_id, meta)

    def headers(self) -> dict[str, str]:
        return {"Idem-Agent": self.agent, **stateless_headers(TOOL)}


@dataclass
class McpJournal:
    """Every answer every agent got, the request budget they share, and what was wrong."""

    budget: int
    sent: int = 0
    sdk_attempts: Counter[str] = field(default_factory=Counter)  # by the client's mode
    answers: dict[McpCall, list[Answer]] = field(default_factory=dict)
    outcomes: Counter[str] = field(default_factory=Counter)
    calls: list[McpCall] = field(default_factory=list)
    wrong_ids: list[str] = field(default_factory=list)  # answers under another request's id
    not_rpc: list[str] = field(default_factory=list)  # answers that were no JSON-RPC message
    spent: asyncio.Event = field(default_factory=asyncio.Event)

    def note(self, call: McpCall, answer: Answer) -> None:
        self.answers.setdefault(call, []).append(answer)
        self.outcomes[f"{answer.status} {answer.outcome}"] += 1
        if self.sent >= self.budget:
            self.spent.set()


def _answer(status: int, outcome: str, effect_key: str, message: Any) -> Answer:
    upstream_id = None
    if status == 200 and isinstance(message, dict) and "result" in message:
        upstream_id = int(message["result"]["structuredContent"]["id"])
    return Answer(status, outcome, effect_key, upstream_id)


async def send_raw(
    session: aiohttp.ClientSession, url: str, call: McpCall, request_id: str, journal: McpJournal
) -> Answer:
    body = orjson.dumps(call.message(request_id))
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    try:
        async with session.post(url, data=body, headers=call.headers(), timeout=timeout) as got:
            raw = await got.read()
            status, headers = got.status, got.headers
    except (aiohttp.ClientError, TimeoutError):
        return Answer(0, "connection-error", "", None)
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError:
        message = None
        journal.not_rpc.append(f"{status} {headers.get('Idem-Outcome')}: {raw[:200]!r}")
    if message is not None and (not isinstance(message, dict) or message.get("id") != request_id):
        journal.wrong_ids.append(f"{request_id} answered as {raw[:200]!r}")
    outcome, effect_key = headers.get("Idem-Outcome", ""), headers.get("Idem-Key", "")
    return _answer(status, outcome, effect_key, message)


async def send_sdk(url: str, mode: str, call: McpCall, journal: McpJournal) -> Answer:
    """One attempt by ``mcp.Client`` in ``mode``, connecting anew: its tools/call as it was on
    the wire."""
    key = Key(call.batch, call.call)
    journal.sdk_attempts[mode] += 1
    wire = RecordingTransport()
    # Whatever a proxy's death does to the client (in whatever shape the SDK's task groups give
    # it) is the attempt's failure; the answer, if one came, is read from the wire below.
    with contextlib.suppress(Exception):
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            async with connect(url, mode, {"Idem-Agent": call.agent}, wire) as connection:
                await connection.client.call_tool(TOOL, call.arguments, meta=key.meta())
    journal.wrong_ids += [f"{asked} answered as {got}" for asked, got in wire.mismatched_ids()]
    answered = [exchange for exchange in wire.tool_calls(TOOL) if exchange.response is not None]
    if not answered:
        return Answer(0, "connection-error", "", None)
    last = answered[-1]
    outcome, effect_key = last.headers.get("idem-outcome", ""), last.headers.get("idem-key", "")
    return _answer(last.status, outcome, effect_key, last.response)


class McpAgent:
    def __init__(
        self,
        name: str,
        journal: McpJournal,
        session: aiohttp.ClientSession,
        pick_proxy: Callable[[], str],
        seed: int,
        *,
        sdk_rate: float = 0.15,
        max_tries: int = 12,
        backoff_s: float = 0.1,
        calls_per_batch: int = 4,
        overlap_rate: float = 0.3,
        rerun_rate: float = 0.2,
    ) -> None:
        self.name = name
        self.journal = journal
        self.session = session
        self.pick_proxy = pick_proxy
        self.rng = random.Random(seed)
        self.sdk_rate = sdk_rate
        self.max_tries = max_tries
        self.backoff_s = backoff_s
        self.calls_per_batch = calls_per_batch
        self.overlap_rate = overlap_rate
        self.rerun_rate = rerun_rate
        self.batches: list[list[McpCall]] = []

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set() and not self.journal.spent.is_set():
            name = f"b{len(self.batches)}"
            batch = [McpCall(self.name, name, f"c{i}") for i in range(self.calls_per_batch)]
            self.batches.append(batch)
            self.journal.calls.extend(batch)
            workers = [self.work(batch)]
            if self.rng.random() < self.overlap_rate:  # a second worker on the same batch
                workers.append(self.work(self.rng.sample(batch, len(batch))))
            await asyncio.gather(*workers)
            if self.rng.random() < self.rerun_rate:  # a recovery run of a finished batch
                await self.work(self.rng.choice(self.batches))

    async def work(self, calls: Sequence[McpCall]) -> None:
        for call in calls:
            await self.call(call)

    async def call(self, call: McpCall) -> Answer:
        """Send until the answer is final, each attempt under a new JSON-RPC id."""
        answer = Answer(0, "never-sent", "", None)
        for attempt in range(self.max_tries):
            self.journal.sent += 1
            url = f"{self.pick_proxy()}/tools{MCP_PATH}"
            if self.rng.random() < self.sdk_rate:
                mode = self.rng.choice(("auto", "legacy"))
                answer = await send_sdk(url, mode, call, self.journal)
            else:
                request_id = f"{self.name}-{self.rng.getrandbits(48):012x}"
                answer = await send_raw(self.session, url, call, request_id, self.journal)
            self.journal.note(call, answer)
            if verdict(answer.status, answer.outcome) is not Verdict.RETRY:
                return answer
            await asyncio.sleep(self.backoff_s * (1 + attempt) * self.rng.random())
        return answer
