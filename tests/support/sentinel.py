"""A real Redis Sentinel set on loopback: one master, one replica, three Sentinels.

The master and replica are a :class:`~tests.support.replication.ReplicatedPair`: the
replica's link runs through a forwarder the test can cut. The Sentinels notice a dead master
within a second and promote the replica within a few more.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis

from tests.support.processes import Process, running
from tests.support.replication import ReplicatedPair, free_ports, wait_until

SERVICE = "effects"
SENTINELS = 3
QUORUM = 2
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000
# Sentinel "fixes" a replica that replicates from another address than the master's it knows
# once failover-timeout has passed since it last reconfigured it, pointing it straight at the
# master. Ours reaches the master through the link's forwarder, so that fix would route the
# replica around a cut link, and a claim the test means to leave unreplicated would be
# confirmed after all (on a loaded machine, three seconds pass before the cut). Until the first
# failover the timeout is held this long; the promotion itself does not wait for it.
HELD_FAILOVER_TIMEOUT_MS = 600_000
# Sentinel's own timers, shortened: it looks at the servers' roles every 10 s (an old master
# that comes back would wait that long to be made a replica) and greets the other Sentinels
# every 2 s. A loaded test machine may stall a Sentinel for two seconds, which would stop it
# acting for 30 s (TILT); it is left more slack.
TIMERS = {"info-period": 250, "publish-period": 250, "tilt-trigger": 10_000}


def sentinel_command(port: int, *args: str) -> Any:
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return client.execute_command("SENTINEL", *args)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
    finally:
        client.close()


def text_map(answer: dict[bytes, bytes]) -> dict[str, str]:
    """A Sentinel map answer, whose keys and values redis-py leaves bytes, as text."""
    return {key.decode(): value.decode() for key, value in answer.items()}


class SentinelProcess(Process):
    def __init__(self, log_dir: Path, port: int, master_port: int) -> None:
        config = log_dir / f"sentinel-{port}.conf"
        # Sentinel rewrites its file as it learns the set, so each one has its own.
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {log_dir}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {master_port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {HELD_FAILOVER_TIMEOUT_MS}\n"
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
        replicas = [text_map(r) for r in sentinel_command(self.port, "REPLICAS", SERVICE)]
        others = sentinel_command(self.port, "SENTINELS", SERVICE)
        healthy = [r for r in replicas if "s_down" not in r["flags"]]
        return len(healthy) == 1 and len(others) == SENTINELS - 1

    def release_failover_timeout(self) -> None:
        sentinel_command(self.port, "SET", SERVICE, "failover-timeout", str(FAILOVER_TIMEOUT_MS))

    def names_master(self, port: int) -> bool:
        """This Sentinel's failover to ``port`` is over: its master record is that node.

        GET-MASTER-ADDR-BY-NAME is not enough: the leader answers with the promoted replica
        while it is still reconfiguring the set, its master record still the old master. An
        old master restarted then looks like that master come back, and the leader turns the
        promoted replica into its replica."""
        master = text_map(sentinel_command(self.port, "MASTER", SERVICE))
        return int(master["port"]) == port and "failover_in_progress" not in master["flags"]


class SentinelSet(ReplicatedPair):
    """Started with :func:`sentinel_set`; the replica's link runs through ``link``."""

    def __init__(self, log_dir: Path) -> None:
        ports = free_ports(3 + SENTINELS)
        super().__init__(log_dir, ports[:3])
        self.sentinels = [SentinelProcess(log_dir, port, self.master.port) for port in ports[3:]]

    @property
    def url(self) -> str:
        """The store URL naming the set; append ``?...`` for store parameters."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def processes(self) -> list[Process]:
        return [*super().processes(), *self.sentinels]

    def wait_ready(self) -> None:
        for sentinel in self.sentinels:
            wait_until(f"sentinel {sentinel.port} takes its timers", sentinel.tune)
        self.wait_synced()
        for sentinel in self.sentinels:
            wait_until(f"sentinel {sentinel.port} sees the set", sentinel.knows_the_set)

    def kill_master(self) -> None:
        """SIGKILL the master and wait until the Sentinels have promoted the replica."""
        self.master.kill()
        for sentinel in self.sentinels:
            promoted = functools.partial(sentinel.names_master, self.replica.port)
            wait_until(f"sentinel {sentinel.port} names the replica master", promoted)
        wait_until("the replica serves as master", lambda: self.replica.role() == "master")
        self._release_failover_timeouts()

    def fail_over(self, cut_for_s: float) -> bool:
        """Whichever node is master now dies and the other is promoted; the dead one then comes
        back, empty, as the new master's replica. The first time, the replica's link is cut
        ``cut_for_s`` before, so the master acknowledges writes the replica never sees; after
        that the nodes are linked directly. Returns whether the link was cut."""
        nodes = (self.master, self.replica)
        master = next(node for node in nodes if node.alive and node.role() == "master")
        survivor = self.replica if master is self.master else self.master
        cut = master is self.master and not self.link.is_cut
        if cut:
            self.link.cut()
            time.sleep(cut_for_s)
        master.kill()
        for sentinel in self.sentinels:
            promoted = functools.partial(sentinel.names_master, survivor.port)
            wait_until(f"sentinel {sentinel.port} names {survivor.port} master", promoted)
        wait_until("the survivor serves as master", lambda: survivor.role() == "master")
        self._release_failover_timeouts()
        # The link leads to the first master's port: to the survivor from now on, when that is
        # the first master, which is where the restarted replica looks for it.
        self.link.mend()
        master.start()
        wait_until("the old master syncs as a replica", master.linked)
        return cut

    def _release_failover_timeouts(self) -> None:
        """Back to the short timeout once a failover has happened: the link is direct after it,
        and a later failover may start again that much sooner (twice the timeout)."""
        for sentinel in self.sentinels:
            sentinel.release_failover_timeout()

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
