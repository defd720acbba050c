"""A Redis master and its replica on loopback, the replica's link through a forwarder.

The replica reaches its master through a :class:`~tests.support.forwarder.Forwarder`, so a
test can cut that one link: the master goes on serving and acknowledging writes the replica
never gets, as in a partition. Ports come from a range of their own (``PORTS``), which no
other test uses.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis

from tests.support.forwarder import Forwarder
from tests.support.processes import Process, RedisServer, running

PORTS = range(6410, 6440)
SETTLE_S = 30.0


def free_ports(count: int) -> list[int]:
    """``count`` ports of ``PORTS`` that nothing listens on."""
    found: list[int] = []
    for port in PORTS:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"fewer than {count} free ports in {PORTS}")


def wait_until(what: str, check: Callable[[], bool], timeout_s: float = SETTLE_S) -> None:
    """Poll ``check`` (a Redis being asked, so nothing to await) until it holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(redis.RedisError):
            if check():
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout_s} s")
        time.sleep(0.05)


def info(port: int, section: str) -> dict[str, Any]:
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return client.info(section)
    finally:
        client.close()


class Node(RedisServer):
    """A data node; a replica when given the port to reach its master on."""

    def __init__(self, log_dir: Path, port: int, master_port: int | None = None) -> None:
        super().__init__(log_dir, port)
        # A replica that (re)joins is synced at once rather than after the default 5 s wait.
        self.args += ["--repl-diskless-sync-delay", "0"]
        if master_port is not None:
            self.args += ["--replicaof", "127.0.0.1", str(master_port)]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def role(self) -> str:
        return str(info(self.port, "replication")["role"])

    def linked(self) -> bool:
        """A replica whose link to its master is up and synced."""
        found = info(self.port, "replication")
        return found["role"] == "slave" and found.get("master_link_status") == "up"


class ReplicatedPair:
    """Started with :func:`replicated_pair`; the replica's link runs through ``link``."""

    def __init__(self, log_dir: Path, ports: list[int]) -> None:
        master, replica, link = ports
        self.master = Node(log_dir, master)
        self.replica = Node(log_dir, replica, master_port=link)
        self.link = Forwarder(link, master)

    @property
    def url(self) -> str:
        """The master's store URL."""
        return self.master.url

    def processes(self) -> list[Process]:
        return [self.master, self.replica]

    def wait_synced(self) -> None:
        wait_until("the replica syncs", self.replica.linked)


@contextlib.contextmanager
def replicated_pair(log_dir: Path) -> Iterator[ReplicatedPair]:
    """A master and its synced replica; both stopped afterwards."""
    pair = ReplicatedPair(log_dir, free_ports(3))
    with pair.link, running(*pair.processes()):
        pair.wait_synced()
        yield pair
