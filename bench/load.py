"""Drive a proxy with wrk and read what Redis did meanwhile (INFO commandstats deltas)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}
_LATENCY = re.compile(r"^\s*(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s|m)\s*$", re.MULTILINE)
# Commands a client sends itself; anything else counted comes from inside a Lua script.
ROUND_TRIP_COMMANDS = frozenset({"evalsha", "eval", "evalsha_ro", "script", "get", "set", "ping"})


@dataclass(frozen=True)
class Cell:
    """One wrk run: throughput and latency at one connection count."""

    req_s: float
    p50_ms: float
    p99_ms: float
    requests: int
    bad: int  # non-2xx answers plus socket errors
    round_trips: float = 0.0  # Redis requests per proxied request
    cpu_us: float = 0.0  # proxy CPU time per request, all its processes: steadier than req/s
    redis_cpu_us: float = 0.0  # Redis server CPU time per request
    commands: float = 0.0  # Redis commands per proxied request, those run by scripts included


def wrk(url: str, script: str, conns: int, duration: str, env: dict[str, str]) -> Cell:
    """Run wrk with one thread (as the reference figures were taken) and parse its report."""
    args = ["wrk", "-t1", f"-c{conns}", f"-d{duration}", "--latency", "--timeout", "10s"]
    args += ["-s", str(HERE / script), url]
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    return parse_wrk(done.stdout)


def parse_wrk(report: str) -> Cell:
    latency = {
        int(pct): float(value) * _UNITS_MS[unit] for pct, value, unit in _LATENCY.findall(report)
    }
    requests = int(_number(r"(\d+) requests in", report))
    bad = int(_number(r"Non-2xx or 3xx responses: (\d+)", report, default="0"))
    errors = re.search(r"connect (\d+), read (\d+), write (\d+), timeout (\d+)", report)
    if errors:
        bad += sum(int(n) for n in errors.groups())
    return Cell(
        req_s=float(_number(r"Requests/sec:\s+([\d.]+)", report)),
        p50_ms=latency.get(50, float("nan")),
        p99_ms=latency.get(99, float("nan")),
        requests=requests,
        bad=bad,
    )


def _number(pattern: str, text: str, default: str | None = None) -> str:
    found = re.search(pattern, text)
    if found:
        return found.group(1)
    if default is None:
        raise ValueError(f"wrk report without {pattern!r}:\n{text}")
    return default


class CommandCounter:
    """Redis commands between two snapshots of ``INFO commandstats``."""

    def __init__(self, port: int) -> None:
        self.client = redis.Redis(host="127.0.0.1", port=port)

    def snapshot(self) -> dict[str, int]:
        stats = self.client.info("commandstats")
        return {
            name.removeprefix("cmdstat_"): int(fields["calls"])
            for name, fields in stats.items()
            if name not in ("cmdstat_info",)
        }

    def per_request(
        self, before: dict[str, int], cell: Cell, cpu_s: float, redis_cpu_s: float
    ) -> Cell:
        after = self.snapshot()
        delta = {name: calls - before.get(name, 0) for name, calls in after.items()}
        count = max(cell.requests, 1)
        trips = sum(calls for name, calls in delta.items() if name in ROUND_TRIP_COMMANDS)
        return Cell(
            cell.req_s,
            cell.p50_ms,
            cell.p99_ms,
            cell.requests,
            cell.bad,
            round_trips=trips / count,
            commands=sum(delta.values()) / count,
            cpu_us=cpu_s * 1e6 / count,
            redis_cpu_us=redis_cpu_s * 1e6 / count,
        )

    def close(self) -> None:
        self.client.close()
