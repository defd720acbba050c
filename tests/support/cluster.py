"""A real Redis Cluster on loopback, built from the redis-server binary by the test itself.

Every node listens on a port at most 55535, because its cluster bus listens 10000 above it.
Nodes fsync their append-only file on every write, like the chaos suite's single Redis.
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from tests.support.fleet import DurableRedis

BUS_PORT_OFFSET = 10_000
PORT_RANGE = range(20_000, 30_000)  # bus ports 30000-39999: below the usual ephemeral range
CLUSTER_UP_S = 30.0
MANUAL_FAILOVER_S = 7.0  # Redis abandons a manual failover after 5 s
FAILOVER_ATTEMPTS = 3


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def cluster_ports(count: int) -> list[int]:
    """Ports whose bus ports (port + 10000) are free as well."""
    ports: list[int] = []
    for port in random.sample(PORT_RANGE, len(PORT_RANGE)):
        if _free(port) and _free(port + BUS_PORT_OFFSET):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError(f"fewer than {count} free port pairs in {PORT_RANGE}")


def wait_cluster_ok(ports: list[int], timeout_s: float = CLUSTER_UP_S) -> None:
    """Until every node named says ``cluster_state:ok``."""
    deadline = time.monotonic() + timeout_s
    for port in ports:
        client = redis.Redis(port=port, socket_timeout=1)
        try:
            while True:
                try:
                    if client.cluster("info").get("cluster_state") == "ok":
                        break
                except redis.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the test cluster is not ok on port {port}")
                time.sleep(0.1)
        finally:
            client.close()


def create_cluster(ports: list[int], replicas: int = 0) -> None:
    """Join the nodes on ``ports`` into one cluster (``replicas`` per master) and wait for it."""
    addresses = [f"127.0.0.1:{port}" for port in ports]
    subprocess.run(
        ["redis-cli", "--cluster", "create", *addresses,
         "--cluster-replicas", str(replicas), "--cluster-yes"],
        check=True,
        capture_output=True,
        timeout=30,
    )  # fmt: skip
    wait_cluster_ok(ports)


class ClusterNode(DurableRedis):
    def __init__(self, workdir: Path, port: int, node_timeout_ms: int) -> None:
        super().__init__(workdir, port)
        self.args += [
            "--cluster-enabled", "yes",
            "--cluster-node-timeout", str(node_timeout_ms),
            "--cluster-config-file", f"nodes-{port}.conf",
            "--appenddirname", f"aof-{port}",
            # A replica that rejoins syncs at once rather than after the default 5 s wait.
            "--repl-diskless-sync-delay", "0",
        ]  # fmt: skip

    def replication(self) -> dict[str, Any]:
        client = redis.Redis(port=self.port, socket_timeout=1)
        try:
            return client.info("replication")
        finally:
            client.close()

    def role(self) -> str:
        return str(self.replication()["role"])

    def replica_ports(self) -> list[int]:
        """The ports of the replicas this master streams to now."""
        info = self.replication()
        return [int(info[f"slave{i}"]["port"]) for i in range(int(info["connected_slaves"]))]


@dataclass
class LocalCluster:
    """Three masters, each with ``replicas`` replicas, started and stopped as one."""

    nodes: list[ClusterNode]
    replicas: int

    @classmethod
    def build(
        cls, workdir: Path, masters: int = 3, replicas: int = 1, node_timeout_ms: int = 2000
    ) -> LocalCluster:
        ports = cluster_ports(masters * (1 + replicas))
        return cls([ClusterNode(workdir, port, node_timeout_ms) for port in ports], replicas)

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        create_cluster(self.ports, self.replicas)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def running_nodes(self) -> list[ClusterNode]:
        return [node for node in self.nodes if node.running]

    def by_role(self, role: str) -> list[ClusterNode]:
        return [node for node in self.running_nodes() if node.role() == role]

    def wait_ok(self, timeout_s: float = CLUSTER_UP_S) -> None:
        """Until every running node serves all slots and every replica is in sync.

        A replica that is not in sync would refuse to take over from a master lost next.
        """
        wait_cluster_ok([node.port for node in self.running_nodes()], timeout_s)
        deadline = time.monotonic() + timeout_s
        for node in self.by_role("slave"):
            while node.replication().get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise TimeoutError(f"replica {node.port} is not in sync")
                time.sleep(0.05)

    def lose_master(self, master: ClusterNode) -> None:
        """Kill ``master`` and wait until one of its replicas has taken over its slots."""
        replicas = [node for node in self.nodes if node.port in master.replica_ports()]
        assert replicas, f"master {master.port} has no replica to take over"
        master.kill()
        deadline = time.monotonic() + CLUSTER_UP_S
        while not any(node.role() == "master" for node in replicas):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no replica of {master.port} took over")
            time.sleep(0.1)
        self.wait_ok()

    def fail_over(self, replica: ClusterNode) -> None:
        """``CLUSTER FAILOVER`` on a replica: a coordinated hand-over that loses no write.

        Redis gives up a manual failover after 5 s (a busy master, a replica still rewriting
        its append-only file after a resync), leaving the roles as they were: ask again.
        """
        for _ in range(FAILOVER_ATTEMPTS):
            client = redis.Redis(port=replica.port, socket_timeout=5)
            try:
                client.cluster("failover")
            finally:
                client.close()
            deadline = time.monotonic() + MANUAL_FAILOVER_S
            while replica.role() != "master" and time.monotonic() < deadline:
                time.sleep(0.05)
            if replica.role() == "master":
                self.wait_ok()
                return
        raise TimeoutError(f"replica {replica.port} did not take over in {FAILOVER_ATTEMPTS} tries")
