"""Run the proxy and admin listeners until SIGTERM/SIGINT, then shut down gracefully."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from idemproxy.admin.agent_context import PREFIX as AGENT_PREFIX
from idemproxy.admin.agent_context import build_agent_app
from idemproxy.admin.app import build_admin_app
from idemproxy.admin.background import cancel_all, ledger_tasks
from idemproxy.config.loader import LoadedConfig
from idemproxy.effects.attempts import Attempts
from idemproxy.effects.seal import CompensationSeal
from idemproxy.instrumented import InstrumentedStore
from idemproxy.metrics import Metrics, StoreScope
from idemproxy.policies.base_url import misplaced_base_urls
from idemproxy.proxy.app import build_proxy_app
from idemproxy.proxy.state import ProxyState
from idemproxy.proxy.upstreams import Upstream
from idemproxy.store.errors import StoreError
from idemproxy.store.factory import open_store, relative_path_note, store_location
from idemproxy.store.protocols import Store
from idemproxy.store.records import RecordState, Settlement
from idemproxy.store.redis.replicas import failover_may_lose_claims
from idemproxy.storeguard import StoreGuard

log = logging.getLogger(__name__)

# Young objects allowed before a collection: 34-162 collections in 6 s of first calls at 32
# connections with the default 700, one with this.
YOUNG_GC_THRESHOLD = 7_000
# How long a cancelled request gets to record its outcome (a shielded store write) and end.
CANCELLED_GRACE_S = 1.0

PROXY_SERVER_SETTINGS: dict[str, Any] = {
    "access_log": None,  # the handler writes its own structured access line
    "auto_decompress": False,  # bodies pass through exactly as the agent encoded them
    # An agent that disconnects must not cancel an effect mid-flight: it is still recorded,
    # so the agent's retry after a restart gets the answer.
    "handler_cancellation": False,
}


def build_state(
    loaded: LoadedConfig, store: Store, metrics: Metrics, seal: CompensationSeal | None = None
) -> ProxyState:
    """The proxy's state; ``seal`` is the one every worker shares (a new one by default)."""
    config = loaded.config
    upstreams = {
        name: Upstream.configure(name, upstream, loaded.policies[name])
        for name, upstream in config.upstreams.items()
    }
    instrumented = InstrumentedStore(store, metrics)
    return ProxyState(
        config=config,
        upstreams=upstreams,
        store=instrumented,
        metrics=metrics,
        attempts=Attempts(),
        guard=StoreGuard(instrumented, config.store_safety, metrics),
        seal=seal or CompensationSeal.generate(),
    )


def tune_garbage_collection() -> None:
    """Collect less where collecting finds next to nothing; call once the proxy is built.

    What start-up built lives as long as the process. Frozen, it is left out of every
    collection: a full one would walk some 65,000 objects (30 ms of CPU with the loop stalled,
    on a 2-core VM) where it now walks only what requests left behind. And a request's objects
    are freed by reference counting as it ends, but the requests in flight alone outgrow the
    default 700 young objects, so the collector ran every ten requests or so to find nothing.
    """
    gc.freeze()
    gc.set_threshold(YOUNG_GC_THRESHOLD, *gc.get_threshold()[1:])


@contextlib.asynccontextmanager
async def store_watch(guard: StoreGuard, interval_s: float) -> AsyncIterator[None]:
    """Check the store at once and every ``interval_s``, in a task of its own, for as long as
    the block runs: the check that tells at start-up whether effects can be kept."""
    task = asyncio.create_task(guard.watch(interval_s))
    try:
        yield
    finally:
        await cancel_all([task])


async def _drain(runner: web.AppRunner, state: ProxyState, timeout_s: float) -> None:
    """Stop taking connections, give the requests in flight ``timeout_s`` to finish, then cancel
    the rest: a cancelled effect records itself unknown on the way out.

    aiohttp's own shutdown waits its timeout for handlers and then as long again before it
    cancels them, which would make shutdown take twice what the pod's grace period allows for.
    """
    state.draining = True
    for site in list(runner.sites):
        await site.stop()
    for stream in state.streams:
        stream.cancel()  # an event stream has no end to wait for, and records nothing
    pending = set(state.handlers)
    if pending:
        _, pending = await asyncio.wait(pending, timeout=timeout_s)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=CANCELLED_GRACE_S)


async def _abandon(state: ProxyState) -> None:
    """Mark what is still held after the shutdown timeout unknown: it may have taken effect."""
    for key, fence in state.attempts.held():
        settlement = Settlement(RecordState.UNKNOWN, reason="proxy shut down holding the request")
        with contextlib.suppress(StoreError):
            await state.store.settle(key, fence, settlement)
        log.warning("abandoned in-flight effect", extra={"effect_key": str(key)})


async def serve(
    loaded: LoadedConfig,
    stop: asyncio.Event | None = None,
    *,
    reuse_port: bool = False,
    seal: CompensationSeal | None = None,
) -> None:
    """Serve until ``stop`` is set or a signal comes; ``reuse_port`` lets workers share sockets
    and ``seal`` (made before they fork) lets each pass the compensations of any other."""
    config = loaded.config
    if config.store.startswith("memory:"):
        log.warning(
            "store is memory://: records vanish when this process stops; use it for tests only"
        )
    if failover_may_lose_claims(config.store):
        log.warning(
            "the store fails over to replicas, and claims do not wait for them: a master lost"
            " before a replica has a claim lets a repeat be sent again; set wait_replicas=1 in"
            " the store URL's query (docs/reliability.md)"
        )
    urls = {name: upstream.url for name, upstream in config.upstreams.items()}
    for problem in misplaced_base_urls(urls, loaded.policies):
        log.warning(
            "%s",
            problem.message(),
            extra={"upstream": problem.upstream, "suggested_url": problem.suggested_url},
        )
    store = open_store(config.store, retention=config.retention.figures())
    metrics = Metrics(store_scope=StoreScope.of(store.backend), agent_id=config.agent_id)
    state = build_state(loaded, store, metrics, seal)
    agent_app = build_agent_app(config, state.store)
    proxy_app = build_proxy_app(state, {AGENT_PREFIX: agent_app})
    # _drain has given handlers their shutdown_timeout_s when aiohttp's shutdown runs.
    proxy_runner = web.AppRunner(
        proxy_app, shutdown_timeout=CANCELLED_GRACE_S, **PROXY_SERVER_SETTINGS
    )
    admin_runner = web.AppRunner(build_admin_app(state), access_log=None)
    await proxy_runner.setup()
    await admin_runner.setup()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        listen, admin_listen = config.listen, config.admin_listen
        proxy_site = web.TCPSite(proxy_runner, listen.host, listen.port, reuse_port=reuse_port)
        admin_site = web.TCPSite(
            admin_runner, admin_listen.host, admin_listen.port, reuse_port=reuse_port
        )
        await admin_site.start()
        await proxy_site.start()
        log.info(
            "idemproxy listening",
            extra={
                "listen": str(config.listen),
                "admin_listen": str(config.admin_listen),
                "store": store.backend,
                "store_location": store_location(config.store),
                "upstreams": sorted(state.upstreams),
            },
        )
        if note := relative_path_note(config.store):
            log.info(note, extra={"store_location": store_location(config.store)})
        tune_garbage_collection()
        async with (
            store_watch(state.guard, config.store_safety.check_interval_s),
            ledger_tasks(config, state.store, metrics),
        ):
            await stop.wait()
        log.info(
            "shutting down: no new effects, in-flight ones get %.1f s", config.shutdown_timeout_s
        )
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await _drain(proxy_runner, state, config.shutdown_timeout_s)
        await proxy_runner.cleanup()
        await _abandon(state)
        await admin_runner.cleanup()
        await state.store.close()
