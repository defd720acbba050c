"""The processes of a chaos run: proxies, a durable Redis and the ledger-keeping upstream."""

from __future__ import annotations

import shutil
import signal
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import redis

from tests.support.agents import VOLATILE_FIELDS
from tests.support.processes import RedisServer, ServedProxy, UpstreamProcess, http_get

CONTROLLER_SECRET = "chaos-controller-signing-secret-0123456789"


class ChaosUpstream(UpstreamProcess):
    """``tests.support.chaos_upstream`` as a process, with its fault switch and its ledger."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir, "tests.support.chaos_upstream", "chaos-upstream")

    def set_faults(
        self,
        rates: dict[str, float],
        hang_s: float = 3.0,
        seed: int = 0,
        controller_failure_rate: float = 0.0,
    ) -> None:
        body = orjson.dumps(
            {
                "rates": rates,
                "hang_s": hang_s,
                "seed": seed,
                "controller_failure_rate": controller_failure_rate,
                "controller_secret": CONTROLLER_SECRET,
            }
        )
        request = urllib.request.Request(f"{self.url}/_faults", data=body, method="PUT")
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200

    def wait_idle(self, timeout_s: float) -> None:
        """Until no hung request is still held, or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while self.ledger().open and time.monotonic() < deadline:
            time.sleep(0.1)

    def ledger(self) -> UpstreamLedger:
        status, body = http_get(f"{self.url}/_ledger", timeout_s=30)
        assert status == 200, body
        document: dict[str, Any] = orjson.loads(body)
        return UpstreamLedger(
            applied=document["applied"],
            received=document["received"],
            faults=document["faults"],
            open=document["open"],
            controller=document["controller"],
            bad_signatures=document["bad_signatures"],
        )


@dataclass(frozen=True)
class UpstreamLedger:
    applied: dict[str, list[int]]  # effect name -> the id of each time it was applied
    received: dict[str, int]
    faults: dict[str, int]
    open: int  # requests the upstream is still holding (hangs)
    controller: dict[str, list[list[str]]]  # agent -> [event id, type, effect key] as arrived
    bad_signatures: int

    def duplicates(self) -> dict[str, list[int]]:
        return {effect: ids for effect, ids in self.applied.items() if len(ids) > 1}


class DurableRedis(RedisServer):
    """A private redis-server that fsyncs its append-only file on every write.

    That is the durability idemproxy needs from Redis: a completed record acknowledged to an
    agent must survive the server being killed, or a repeat would be forwarded again.
    """

    def __init__(self, log_dir: Path, port: int | None = None) -> None:
        super().__init__(log_dir, port)
        self.args[self.args.index("--appendonly") + 1] = "yes"
        self.aof_dir = log_dir / f"aof-{self.port}"
        self.args += ["--appendfsync", "always", "--appenddirname", self.aof_dir.name]

    def lose_data(self) -> None:
        """Kill it and delete its append-only file: it comes back empty, as a Redis without a
        volume (or without persistence) does after a restart."""
        self.kill()
        shutil.rmtree(self.aof_dir, ignore_errors=True)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def set_maxmemory(self, limit: int) -> None:
        """``CONFIG SET maxmemory`` (0: no limit); the policy stays ``noeviction``."""
        client = redis.Redis(port=self.port, socket_timeout=5)
        try:
            client.config_set("maxmemory", limit)
        finally:
            client.close()


class FleetProxy(ServedProxy):
    """One of several ``idemproxy serve`` processes of a run, each with its own log file."""

    def __init__(self, log_dir: Path, index: int, *args: str) -> None:
        super().__init__(log_dir, *args)
        self.name = f"proxy-{index}"
        self.log_path = log_dir / f"{self.name}.log"
        self.paused = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP: the process holds its connections and leases but does nothing at all."""
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        """A paused process would not act on SIGTERM: wake it first."""
        if self.paused and self.running:
            self.resume()
        super().stop()


def write_proxy_config(
    path: Path, upstream_url: str, *, lease_ms: int, coalesce_wait_ms: int, read_timeout_s: float
) -> Path:
    """A config with one upstream ``up`` whose every POST is an external effect."""
    policy = path.with_name(path.stem + "-policy.yaml")
    policy.write_text(
        "name: chaos\nroutes: []\n"
        f"default: {{name: write, lease_ms: {lease_ms}, coalesce_wait_ms: {coalesce_wait_ms},"
        f" volatile_fields: [{', '.join(VOLATILE_FIELDS)}], tool_call_effects: one}}\n"
    )
    upstream = f"url: '{upstream_url}/api', policy: '{policy}', read_timeout_s: {read_timeout_s}"
    # Short controller timings, so deliveries catch up within a test after faults.
    controller = (
        f"url: '{upstream_url}/_controller', secret: '{CONTROLLER_SECRET}', attempts: 1000,"
        " backoff_s: 0.1, max_backoff_s: 0.5, timeout_s: 1, poll_interval_s: 0.2"
    )
    # The run fails upstream calls far more often than a healthy agent ever sees, so an agent
    # would now and then fail five in a row and be paused; the audit needs every agent acting
    # to the end (the pause has tests of its own: tests/effects/test_pause.py, tests/e2e).
    recovery = "recovery: {pause_after_failures: 0}\n"
    path.write_text(
        f"upstreams:\n  up: {{{upstream}}}\ncontroller: {{{controller}}}\nshutdown_timeout_s: 2\n"
        + recovery
    )
    return path
