"""The ledger's background work in a running proxy: the review sweep and, when a recovery
controller is configured, delivery of effect events to its webhook."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping

from aiohttp import ClientError, ClientSession, ClientTimeout
from yarl import URL

from idemproxy.config.settings import ProxyConfig
from idemproxy.ledger.delivery import Delivery, Posted
from idemproxy.ledger.sweeper import Sweeper
from idemproxy.metrics import Metrics
from idemproxy.store.protocols import Store

log = logging.getLogger(__name__)

CANCEL_AGAIN_S = 0.5


class WebhookTransport:
    """POSTs deliveries to the controller's URL over one pooled session."""

    def __init__(self, session: ClientSession, url: str, timeout_s: float) -> None:
        self._session = session
        self._url = url
        self._timeout = ClientTimeout(total=timeout_s)

    async def post(self, body: bytes, headers: Mapping[str, str]) -> Posted:
        try:
            async with self._session.post(
                self._url, data=body, headers=dict(headers), timeout=self._timeout
            ) as response:
                await response.read()
                return Posted(response.status)
        except TimeoutError:
            return Posted(0, f"no answer within {self._timeout.total} s")
        except ClientError as exc:
            return Posted(0, f"{type(exc).__name__}: {exc}")


@contextlib.asynccontextmanager
async def ledger_tasks(config: ProxyConfig, store: Store, metrics: Metrics) -> AsyncIterator[None]:
    """Run the sweep (and delivery, if configured) for as long as the block runs."""
    tasks = [asyncio.create_task(Sweeper(store, metrics, config.recovery.sweep_interval_s).run())]
    session = None
    controller = config.controller
    if controller.url is not None:
        session = ClientSession()
        transport = WebhookTransport(session, controller.url, controller.timeout_s)
        delivery = Delivery(store, transport, controller, metrics)
        tasks.append(asyncio.create_task(delivery.run()))
        where = URL(controller.url).with_query(None).with_user(None)  # no secrets in logs
        log.info("delivering effect events to the recovery controller at %s", where)
    try:
        yield
    finally:
        # A batch cut off mid-POST was not acknowledged: it is sent again after a restart.
        await cancel_all(tasks)
        if session is not None:
            await session.close()


async def cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the tasks and wait until every one has ended, cancelling again if need be.

    On Python 3.11 ``asyncio.wait_for`` (which redis-py awaits on every command) drops a
    cancellation that arrives as the awaited call completes (CPython gh-86296); a loop that
    retries on errors then runs on, and shutdown would wait for it forever.
    """
    pending = set(tasks)
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_AGAIN_S)
    await asyncio.gather(*tasks, return_exceptions=True)
