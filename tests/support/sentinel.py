"""A real Redis Sentinel set on loopback: one master, one replica, three Sentinels.

The replica reaches its master through a :class:`~tests.support.forwarder.Forwarder`, so a
test can cut that one link: the master goes on serving and acknowledging writes the replica
never gets, as in a partition. The Sentinels notice a dead master within a second and
promote the replica within a few more. Ports come from a range of their own
(``SENTINEL_PORTS``), which no other test uses.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis

from tests.support.forwarder import Forwarder
from tests.support.processes import Process, RedisServer, running

SERVICE = "effects"
SENTINEL_PORTS = range(6410, 6440)
SENTINELS = 3
QUORUM = 2
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000
SETTLE_S = 30.0
# Sentinel's own timers, shortened: it looks at the servers' roles every 10 s (an old master
# that comes back would wait that long to be made a replica) and greets the other Sentinels
# every 2 s. A loaded test machine may stall a Sentinel for two seconds, which would stop it
# acting for 30 s (TILT); it is left more slack.
TIMERS = {"info-period": 250, "publish-period": 250, "tilt-trigger": 10_000}


def sentinel_ports(count: int) -> list[int]:
    """``count`` ports of ``SENTINEL_PORTS`` that nothing listens on."""
    found: list[int] = []
    for port in SENTINEL_PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"fewer than {count} free ports in {SENTINEL_PORTS}")


def wait_until(what: str, check: Callable[[], bool], timeout_s: float = SETTLE_S) -> None:
    """Poll ``check`` (a Redis being asked, so nothing to await) until it holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(redis.RedisError):
            if check():
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Sentinel set: {what} after {timeout_s} s")
        time.sleep(0.05)


def info(port: int, section: str) -> dict[str, Any]:
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return client.info(section)
    finally:
        client.close()


def sentinel_command(port: int, *args: str) -> Any:
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return client.execute_command("SENTINEL", *args)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
    finally:
        client.close()


class Node(RedisServer):
    """A data node of the set; a replica one when given the port to reach its master on."""

    def __init__(self, log_dir: Path, port: int, master_port: int | None = None) -> None:
        super().__init__(log_dir, port)
        # A replica that (re)joins is synced at once rather than after the default 5 s wait.
        self.args += ["--repl-diskless-sync-delay", "0"]
        if master_port is not None:
            self.args += ["--replicaof", "127.0.0.1", str(master_port)]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def role(self) -> str:
        return str(info(self.port, "replication")["role"])

    def linked(self) -> bool:
        """A replica whose link to its master is up and synced."""
        found = info(self.port, "replication")
        return found["role"] == "slave" and found.get("master_link_status") == "up"


class SentinelProcess(Process):
    def __init__(self, log_dir: Path, port: int, master_port: int) -> None:
        config = log_dir / f"sentinel-{port}.conf"
        # Sentinel rewrites its file as it learns the set, so each one has its own.
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {log_dir}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {master_port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
        )
        binary = shutil.which("redis-server")
        assert binary is not None, "redis-server is missing: apt-get install redis-server"
        super().__init__(
            f"sentinel-{port}", [binary, str(config), "--sentinel"], log_dir, dict(os.environ)
        )
        self.port = port

    def tune(self) -> bool:
        for name, value in TIMERS.items():
            sentinel_command(self.port, "DEBUG", name, str(value))
        return True

    def knows_the_set(self) -> bool:
        """This Sentinel sees the replica and the other Sentinels, so it can vote and promote."""
        replicas = sentinel_command(self.port, "REPLICAS", SERVICE)
        others = sentinel_command(self.port, "SENTINELS", SERVICE)
        healthy = [r for r in replicas if "s_down" not in str(r.get("flags", ""))]
        return len(healthy) == 1 and len(others) == SENTINELS - 1

    def names_master(self, port: int) -> bool:
        _, named = sentinel_command(self.port, "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(named) == port


class SentinelSet:
    """Started with :func:`sentinel_set`; the replica's link runs through ``link``."""

    def __init__(self, log_dir: Path) -> None:
        master, replica, link, *sentinels = sentinel_ports(3 + SENTINELS)
        self.master = Node(log_dir, master)
        self.replica = Node(log_dir, replica, master_port=link)
        self.link = Forwarder(link, master)
        self.sentinels = [SentinelProcess(log_dir, port, master) for port in sentinels]

    @property
    def url(self) -> str:
        """The store URL naming the set; append ``?...`` for store parameters."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def processes(self) -> list[Process]:
        return [self.master, self.replica, *self.sentinels]

    def wait_ready(self) -> None:
        for sentinel in self.sentinels:
            wait_until(f"sentinel {sentinel.port} takes its timers", sentinel.tune)
        wait_until("the replica syncs", self.replica.linked)
        for sentinel in self.sentinels:
            wait_until(f"sentinel {sentinel.port} sees the set", sentinel.knows_the_set)

    def kill_master(self) -> None:
        """SIGKILL the master and wait until the Sentinels have promoted the replica."""
        self.master.kill()
        for sentinel in self.sentinels:
            promoted = functools.partial(sentinel.names_master, self.replica.port)
            wait_until(f"sentinel {sentinel.port} names the replica master", promoted)
        wait_until("the replica serves as master", lambda: self.replica.role() == "master")

    def rejoin_old_master(self) -> None:
        """Restart the killed master, empty; the Sentinels turn it into the new master's
        replica, as they do for any old master that comes back."""
        self.master.start()
        wait_until("the old master syncs as a replica", self.master.linked)


@contextlib.contextmanager
def sentinel_set(log_dir: Path) -> Iterator[SentinelSet]:
    """A running set, ready to fail over; every process stopped afterwards."""
    found = SentinelSet(log_dir)
    with found.link, running(*found.processes()):
        found.wait_ready()
        yield found
