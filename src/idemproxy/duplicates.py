"""Blocked duplicates by agent and batch: who keeps repeating, and what.

``idemproxy_duplicates_blocked_total`` counts repeats by route, kind and (bounded) agent; a batch
id is unbounded, so no metric may carry it. :class:`BlockedDuplicates` keeps them in memory
instead, bounded as well: the :data:`BATCHES_MAX` batches that had a repeat blocked most
recently, each with its counts by kind and by route. ``idemproxy duplicates`` and ``GET
/v1/duplicates`` show them.

It covers what this proxy blocked since it started, which for a sidecar is all of its agent's
traffic. Under workers each worker publishes its tally, at most once a second, to a file beside
its metrics files, and whichever worker is asked answers with the sum over all of them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)

BATCHES_MAX = 1000
TOP_ROUTES = 3
PUBLISH_INTERVAL_S = 1.0
FILE_PREFIX = "blocked-duplicates-"

Route = tuple[str, str]  # upstream, route name


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class BatchTally:
    """The repeats blocked in one batch of one agent."""

    agent: str
    batch: str
    kinds: Counter[str] = field(default_factory=Counter)
    routes: Counter[Route] = field(default_factory=Counter)
    last_blocked_ms: int = 0

    @property
    def blocked(self) -> int:
        return sum(self.kinds.values())

    def add(self, other: BatchTally) -> None:
        self.kinds.update(other.kinds)
        self.routes.update(other.routes)
        self.last_blocked_ms = max(self.last_blocked_ms, other.last_blocked_ms)

    def copy(self) -> BatchTally:
        return BatchTally(
            self.agent, self.batch, Counter(self.kinds), Counter(self.routes), self.last_blocked_ms
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "batch": self.batch,
            "kinds": dict(self.kinds),
            "routes": [[upstream, route, n] for (upstream, route), n in self.routes.items()],
            "last_blocked_ms": self.last_blocked_ms,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchTally:
        routes = Counter({(upstream, route): n for upstream, route, n in data["routes"]})
        return cls(
            data["agent"], data["batch"], Counter(data["kinds"]), routes, data["last_blocked_ms"]
        )


@dataclass(slots=True)
class _Published:
    since_ms: int
    forgotten: tuple[int, int]  # batches dropped to make room, and the repeats they counted
    batches: list[BatchTally]


class BlockedDuplicates:
    """The tally of one proxy process (and, under workers, the reader of the others')."""

    def __init__(
        self,
        publish_dir: str | None = None,
        limit: int = BATCHES_MAX,
        clock_ms: Callable[[], int] = _now_ms,
        worker: str = "",
    ) -> None:
        """``publish_dir``: the workers' shared directory, None for a proxy on its own;
        ``worker`` names this one's file there (default: the process id)."""
        self._batches: OrderedDict[tuple[str, str], BatchTally] = OrderedDict()
        self._limit = limit
        self._clock_ms = clock_ms
        self._since_ms = clock_ms()
        self._forgotten_batches = self._forgotten_repeats = 0  # dropped to make room
        self._publish_dir = Path(publish_dir) if publish_dir else None
        self._publishing: asyncio.TimerHandle | None = None
        self._file = f"{FILE_PREFIX}{worker or os.getpid()}.json"

    def count(self, agent: str, batch: str, upstream: str, route: str, kind: str) -> None:
        """One repeat blocked: called on the request path, so it only adds in memory."""
        key = (agent, batch)
        tally = self._batches.get(key)
        if tally is None:
            tally = self._batches[key] = BatchTally(agent, batch)
            if len(self._batches) > self._limit:
                _, dropped = self._batches.popitem(last=False)
                self._forgotten_batches += 1
                self._forgotten_repeats += dropped.blocked
        else:
            self._batches.move_to_end(key)
        tally.kinds[str(kind)] += 1  # a plain str: a StrEnum key does not go to JSON
        tally.routes[(upstream, route)] += 1
        tally.last_blocked_ms = self._clock_ms()
        if self._publish_dir is not None and self._publishing is None:
            loop = asyncio.get_running_loop()
            self._publishing = loop.call_later(PUBLISH_INTERVAL_S, self._publish)

    def summary(self, agent: str | None = None, batches: int = 10) -> dict[str, Any]:
        """Per agent, most repeats first: totals, top routes and the ``batches`` top batches."""
        published = [self._own(), *self._others()]
        merged: dict[tuple[str, str], BatchTally] = {}
        for part in published:
            for tally in part.batches:
                if agent is not None and tally.agent != agent:
                    continue
                key = (tally.agent, tally.batch)
                if key in merged:
                    merged[key].add(tally)
                else:
                    merged[key] = tally.copy()
        return {
            "since_ms": min(part.since_ms for part in published),
            "blocked": sum(tally.blocked for tally in merged.values()),
            "agents": _by_agent(merged.values(), batches),
            "batches_kept": self._limit,
            "batches_forgotten": sum(part.forgotten[0] for part in published),
            "repeats_forgotten": sum(part.forgotten[1] for part in published),
        }

    def _own(self) -> _Published:
        forgotten = (self._forgotten_batches, self._forgotten_repeats)
        return _Published(self._since_ms, forgotten, list(self._batches.values()))

    def _publish(self) -> None:
        self._publishing = None
        assert self._publish_dir is not None
        own = self._own()
        document = {
            "since_ms": own.since_ms,
            "forgotten": list(own.forgotten),
            "batches": [tally.as_json() for tally in own.batches],
        }
        path = self._publish_dir / self._file
        written = path.with_suffix(".part")
        try:
            written.write_bytes(orjson.dumps(document))
            written.replace(path)  # readers never see half a file
        except OSError as exc:
            log.warning("could not publish the blocked duplicates", extra={"reason": str(exc)})

    def _others(self) -> list[_Published]:
        """What the other workers published, if there are any."""
        if self._publish_dir is None:
            return []
        found = []
        for path in self._publish_dir.glob(f"{FILE_PREFIX}*.json"):
            if path.name == self._file:
                continue
            try:
                data = orjson.loads(path.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue  # a worker that is gone with its directory
            batches = [BatchTally.from_json(entry) for entry in data["batches"]]
            batches_forgotten, repeats_forgotten = data["forgotten"]
            forgotten = (batches_forgotten, repeats_forgotten)
            found.append(_Published(data["since_ms"], forgotten, batches))
        return found


def _by_agent(tallies: Iterable[BatchTally], batches: int) -> list[dict[str, Any]]:
    agents: dict[str, list[BatchTally]] = {}
    for tally in tallies:
        agents.setdefault(tally.agent, []).append(tally)
    documents: list[dict[str, Any]] = []
    for agent, own in agents.items():
        own.sort(key=lambda t: (-t.blocked, -t.last_blocked_ms))
        kinds: Counter[str] = Counter()
        routes: Counter[Route] = Counter()
        for tally in own:
            kinds.update(tally.kinds)
            routes.update(tally.routes)
        documents.append(
            {
                "agent": agent,
                "blocked": sum(kinds.values()),
                "kinds": dict(kinds.most_common()),
                "top_routes": _top_routes(routes),
                "batches": [_batch(tally) for tally in own[:batches]],
                "batches_not_shown": max(0, len(own) - batches),
            }
        )
    documents.sort(key=lambda d: (-d["blocked"], d["agent"]))
    return documents


def _batch(tally: BatchTally) -> dict[str, Any]:
    return {
        "batch": tally.batch,
        "blocked": tally.blocked,
        "kinds": dict(tally.kinds.most_common()),
        "top_routes": _top_routes(tally.routes),
        "last_blocked_ms": tally.last_blocked_ms,
    }


def _top_routes(routes: Counter[Route]) -> list[dict[str, Any]]:
    return [
        {"upstream": upstream, "route": route, "blocked": n}
        for (upstream, route), n in routes.most_common(TOP_ROUTES)
    ]
