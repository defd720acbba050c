"""Simulated agents: tool calls sent through idemproxy the way a real agent and its SDK would.

An agent works through batches of tool calls. Sometimes a second worker runs the same batch at
the same time (an agent restarted while its old instance was still going), and sometimes a
finished batch is run again whole (a recovery run). Every call carries the batch and tool-call
headers and the same content on every repeat, but each attempt encodes it anew, as SDKs do: a
fresh random nonce (a volatile field), and as plain JSON, gzipped with a fresh timestamp, or
multipart with a fresh boundary and the JSON in a ``payload_json`` part. Some attempts are worded
anew, as an LLM re-planning after a crash does. So every repeat is the same effect only if the
proxy sees through the encoding, and acts once per tool call (the chaos route is
``tool_call_effects: one``) whatever the wording.

What an agent does with an answer (:func:`verdict`) is what the SPEC tells it to: retry when
nothing can have happened or the proxy asks it to come back, stop on an answer, and stop on an
unknown outcome, which waits for review. Some attempts are abandoned before their answer
arrives (the agent killed, or its SDK's timeout shorter than the upstream's answer): the proxy
must finish and record the effect anyway, so that the repeat is a replay.
"""

from __future__ import annotations

import asyncio
import gzip
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import aiohttp
import orjson

RETRY_OUTCOMES = frozenset(
    {
        "store-unavailable",
        "store-not-replicated",
        "shutting-down",
        "request-in-progress",
        "upstream-unreachable",
    }
)
UNKNOWN_OUTCOMES = frozenset({"outcome-unknown", "upstream-timeout", "upstream-disconnected"})
# The store lost records: every effect waits for an operator, as an unknown outcome does.
LOST_OUTCOMES = frozenset({"store-records-lost"})
# A request worded anew for a tool call that already acted: the answer says what it did.
ALREADY_ACTED = "tool-call-already-acted"
REQUEST_TIMEOUT_S = 15.0


class Verdict(StrEnum):
    DONE = "done"  # the effect's answer: forwarded, replayed or coalesced
    UNKNOWN = "unknown"  # it may have happened; never re-sent, waits for review
    RETRY = "retry"  # nothing a retry could repeat happened, or the proxy said come back
    HELD = "held"  # the store lost records: nothing is sent until an operator says so
    ANOMALY = "anomaly"  # an answer the proxy should never give here


@dataclass(frozen=True, slots=True)
class ToolCall:
    agent: str
    batch: str
    call: str

    @property
    def effect(self) -> str:
        """The name the upstream's ledger knows this effect by."""
        return f"{self.agent}/{self.batch}/{self.call}"

    def headers(self) -> dict[str, str]:
        return {"Idem-Agent": self.agent, "Idem-Batch": self.batch, "Idem-Tool-Call": self.call}

    def content(self, nonce: int, wording: int = 0) -> bytes:
        """The call's JSON; a ``wording`` other than 0 is the LLM putting the same text anew."""
        text = f"result of {self.call}" + (f", worded anew ({wording})" if wording else "")
        return orjson.dumps({"effect": self.effect, "text": text, "nonce": nonce})


class Encoding(StrEnum):
    JSON = "json"
    GZIP = "gzip"  # Content-Encoding: gzip, its header's timestamp drawn at random
    MULTIPART = "multipart"  # the JSON in a payload_json part, beside a file


# What the agents' requests leave out of the digest: the nonce, wherever it stands.
VOLATILE_FIELDS = ("/nonce", "/payload_json/nonce")


def encoded(
    call: ToolCall, encoding: Encoding, rng: random.Random, wording: int = 0
) -> tuple[bytes, dict[str, str]]:
    """One attempt's body and headers: the call's content, encoded afresh."""
    content = call.content(nonce=rng.getrandbits(32), wording=wording)
    headers = call.headers()
    if encoding is Encoding.JSON:
        return content, {**headers, "Content-Type": "application/json"}
    if encoding is Encoding.GZIP:
        body = gzip.compress(content, mtime=rng.getrandbits(31))
        return body, {**headers, "Content-Type": "application/json", "Content-Encoding": "gzip"}
    boundary = f"chaos-{rng.getrandbits(64):016x}"
    parts = (
        b'Content-Disposition: form-data; name="payload_json"\r\n'
        b"Content-Type: application/json\r\n\r\n" + content,
        b'Content-Disposition: form-data; name="files[0]"; filename="result.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\n" + call.effect.encode(),
    )
    delimiter = f"--{boundary}\r\n".encode()
    body = b"".join(delimiter + part + b"\r\n" for part in parts) + f"--{boundary}--\r\n".encode()
    return body, {**headers, "Content-Type": f"multipart/form-data; boundary={boundary}"}


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    outcome: str  # Idem-Outcome, or "connection-error" when no answer came
    effect_key: str  # Idem-Key: "<agent>/<effect id>"
    upstream_id: int | None  # the upstream's id of the application, on a 200

    @property
    def verdict(self) -> Verdict:
        return verdict(self.status, self.outcome)


def verdict(status: int, outcome: str) -> Verdict:
    if status == 200 or (status == 409 and outcome == ALREADY_ACTED):
        return Verdict.DONE
    if outcome in RETRY_OUTCOMES or outcome == "connection-error":
        return Verdict.RETRY
    if outcome == "forwarded" and status == 429:
        return Verdict.RETRY  # the upstream did not act and the proxy freed the key
    if outcome in UNKNOWN_OUTCOMES or (outcome == "forwarded" and status in (500, 503)):
        return Verdict.UNKNOWN
    if outcome in LOST_OUTCOMES:
        return Verdict.HELD
    return Verdict.ANOMALY


async def send(
    session: aiohttp.ClientSession,
    proxy_url: str,
    request: tuple[bytes, dict[str, str]],
    give_up_s: float = REQUEST_TIMEOUT_S,
) -> Answer:
    """One attempt; the connection is closed unanswered after ``give_up_s``."""
    body, headers = request
    try:
        async with session.post(
            f"{proxy_url}/up/effects",
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=give_up_s),
        ) as response:
            body = await response.read()
            upstream_id = None
            if response.status == 200:
                upstream_id = int(orjson.loads(body)["id"])
            elif response.headers.get("Idem-Outcome") == ALREADY_ACTED:
                upstream_id = int(orjson.loads(body)["recorded_answer"]["id"])
            return Answer(
                response.status,
                response.headers.get("Idem-Outcome", ""),
                response.headers.get("Idem-Key", ""),
                upstream_id,
            )
    except (aiohttp.ClientError, TimeoutError):
        return Answer(0, "connection-error", "", None)


@dataclass
class Journal:
    """Every answer every agent got, and the request budget they share."""

    budget: int
    sent: int = 0
    answers: dict[ToolCall, list[Answer]] = field(default_factory=dict)
    outcomes: Counter[str] = field(default_factory=Counter)
    encodings: Counter[Encoding] = field(default_factory=Counter)
    reworded: int = 0  # attempts sent worded anew
    abandoned: int = 0  # attempts whose agent went away before the answer
    calls: list[ToolCall] = field(default_factory=list)
    spent: asyncio.Event = field(default_factory=asyncio.Event)  # set once the budget is used

    def note(self, call: ToolCall, answer: Answer) -> None:
        self.answers.setdefault(call, []).append(answer)
        self.outcomes[f"{answer.status} {answer.outcome}"] += 1
        if self.exhausted:
            self.spent.set()

    @property
    def exhausted(self) -> bool:
        return self.sent >= self.budget


@dataclass(frozen=True)
class AgentPlan:
    calls_per_batch: int = 4
    overlap_rate: float = 0.3  # a second worker runs the same batch concurrently
    rerun_rate: float = 0.2  # a finished batch is run again whole, as a recovery run would
    max_tries: int = 12
    backoff_s: float = 0.1
    think_s: float = 0.05  # most an agent pauses between two tool calls
    # A tool call's client sends multipart or JSON every time, fresh boundaries or nonces
    # aside; a JSON body may go gzipped on one attempt and plain on the next.
    multipart_rate: float = 0.3
    gzip_rate: float = 0.4
    reword_rate: float = 0.2  # an attempt whose text the LLM put in other words
    # An attempt whose agent goes away within ``abandon_s`` of sending, answer or not.
    abandon_rate: float = 0.05
    abandon_s: tuple[float, float] = (0.01, 0.3)


class Agent:
    def __init__(
        self,
        name: str,
        plan: AgentPlan,
        journal: Journal,
        session: aiohttp.ClientSession,
        pick_proxy: Callable[[], str],
        seed: int,
    ) -> None:
        self.name = name
        self.plan = plan
        self.journal = journal
        self.session = session
        self.pick_proxy = pick_proxy
        self.rng = random.Random(seed)
        self.batches: list[list[ToolCall]] = []

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set() and not self.journal.exhausted:
            batch_name = f"b{len(self.batches)}"
            batch = [
                ToolCall(self.name, batch_name, f"c{i}") for i in range(self.plan.calls_per_batch)
            ]
            self.batches.append(batch)
            self.journal.calls.extend(batch)
            workers = [self.work(batch)]
            if self.rng.random() < self.plan.overlap_rate:
                workers.append(self.work(self.rng.sample(batch, len(batch))))
            await asyncio.gather(*workers)
            if self.rng.random() < self.plan.rerun_rate:
                await self.work(self.rng.choice(self.batches))

    async def work(self, calls: Sequence[ToolCall]) -> None:
        for call in calls:
            await self.call(call)
            await asyncio.sleep(self.rng.uniform(0, self.plan.think_s))

    def encoding(self, call: ToolCall) -> Encoding:
        """How this attempt of ``call`` is encoded: its kind of body is the call's own."""
        if random.Random(call.effect).random() < self.plan.multipart_rate:
            return Encoding.MULTIPART
        return Encoding.GZIP if self.rng.random() < self.plan.gzip_rate else Encoding.JSON

    async def call(self, call: ToolCall) -> Answer:
        """Send until the answer is final, as an agent's SDK retry loop would."""
        answer = Answer(0, "never-sent", "", None)
        for attempt in range(self.plan.max_tries):
            self.journal.sent += 1
            encoding = self.encoding(call)
            self.journal.encodings[encoding] += 1
            wording = self.rng.randint(1, 1000) if self.rng.random() < self.plan.reword_rate else 0
            self.journal.reworded += bool(wording)
            request = encoded(call, encoding, self.rng, wording)
            give_up_s = REQUEST_TIMEOUT_S
            if self.rng.random() < self.plan.abandon_rate:
                self.journal.abandoned += 1
                give_up_s = self.rng.uniform(*self.plan.abandon_s)
            answer = await send(self.session, self.pick_proxy(), request, give_up_s)
            self.journal.note(call, answer)
            if answer.verdict is not Verdict.RETRY:
                return answer
            await asyncio.sleep(self.plan.backoff_s * (1 + attempt) * self.rng.random())
        return answer
