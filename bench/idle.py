"""Redis commands an idle proxy's background work sends in 10 s, with N agents in the registry.

    .venv/bin/python bench/idle.py --agents 3000 [--controller] [--seeded]

Starts a private redis-server on a free loopback port, lists N agent ids in ``idem:agents`` (as
proxies that served them leave it), runs the sweep (and, with ``--controller``, delivery to a
controller that is never called: there is nothing to deliver) for 10 s, and prints every
command Redis ran meanwhile, those inside scripts included (``INFO commandstats``).
``--seeded`` first lets the store finish its one-time walk of the registry, and prints its cost.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import redis.asyncio
from procs import Proc, free_port

from idemproxy.admin.background import ledger_tasks
from idemproxy.config.settings import ControllerConfig, ProxyConfig
from idemproxy.metrics import Metrics
from idemproxy.store.redis import keys as layout
from idemproxy.store.redis.store import RedisStore

RUN_S = 10.0


async def commands(admin: redis.asyncio.Redis) -> int:
    stats = await admin.info("commandstats")
    return sum(int(entry["calls"]) for entry in stats.values())


async def measure(url: str, agents: int, controller: bool, seeded: bool) -> None:
    admin = redis.asyncio.Redis.from_url(url)
    now_ms = time.time_ns() // 1_000_000
    for start in range(0, agents, 10_000):
        ids = range(start, min(agents, start + 10_000))
        await admin.zadd(layout.AGENTS_KEY, {f"agent-{i}": now_ms for i in ids})
    config = ProxyConfig(store=url)
    if controller:
        config = ProxyConfig(
            store=url, controller=ControllerConfig(url="http://127.0.0.1:1/", secret="s" * 32)
        )
    store = RedisStore.from_url(url)
    if seeded:
        await admin.config_resetstat()
        while not await admin.exists(layout.SEEDED_KEY):
            await store.forget_agents()
        print(f"one-time walk of the registry: {await commands(admin):,} commands")
    await admin.config_resetstat()
    async with ledger_tasks(config, store, Metrics()):
        await asyncio.sleep(RUN_S)
    sent = await commands(admin)
    print(f"{agents:,} agents, controller {'on' if controller else 'off'}: {sent:,} commands")
    await store.close()
    await admin.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=3000)
    parser.add_argument("--controller", action="store_true")
    parser.add_argument("--seeded", action="store_true")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as workdir:
        redis_args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no", "--dir", workdir]  # fmt: skip
        server = Proc("redis", redis_args, Path(workdir)).start(port)
        try:
            url = f"redis://127.0.0.1:{port}/0"
            asyncio.run(measure(url, args.agents, args.controller, args.seeded))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
