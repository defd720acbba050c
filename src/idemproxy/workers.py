"""Several proxy processes on one listener, so a sidecar can use more than one core.

One event loop keeps one core busy at most. With ``workers: N`` (``--workers N``) the ``serve``
process starts N - 1 more processes and serves as the first worker itself; each worker is a
whole proxy with its own connection pools, bound to the proxy and admin addresses with
``SO_REUSEPORT`` so that the kernel spreads incoming connections over them.

- Exactly-once holds across workers because every decision is taken in the shared store.
  Duplicates on one worker wait for each other in memory; a duplicate on another worker finds
  the record in flight and polls the store until it settles, then replays it.
- ``/metrics`` on any worker reports the sum over all of them: workers write their series to
  files in a private directory (prometheus_client's multiprocess mode).
- SIGTERM or SIGINT to the first worker reaches every other worker once, and each drains as a
  single proxy does. A worker that exits on its own stops the others and ``serve`` exits 1, so
  the container restarts whole instead of running on with fewer workers than configured. A
  worker whose first worker was killed drains and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from multiprocessing.context import ForkProcess
from pathlib import Path

from prometheus_client import values
from prometheus_client.multiprocess import mark_process_dead

from idemproxy import eventloop
from idemproxy.config.loader import LoadedConfig
from idemproxy.effects.seal import CompensationSeal
from idemproxy.logs import configure_logging
from idemproxy.metrics import MULTIPROCESS_DIR_ENV

log = logging.getLogger(__name__)

METRICS_DIRECTORY_PREFIX = "idemproxy-metrics-"


def run_workers(loaded: LoadedConfig) -> int:
    """Serve with ``loaded.config.workers`` processes until a signal; the command's exit code."""
    with _metrics_directory() as directory:
        # One seal for all: a compensation one worker's admin API sends may reach any worker.
        seal = CompensationSeal.generate()
        # Forked before this process opens any loop, connection or thread: a worker starts
        # without importing everything again and shares those pages until it writes to them.
        context = multiprocessing.get_context("fork")
        team = _Team(
            [
                context.Process(
                    target=_worker, args=(loaded, seal), name=f"idemproxy-worker-{index}"
                )
                for index in range(1, loaded.config.workers)
            ],
            directory,
            seal,
        )
        # A worker's collections then never write to the start-up objects, so the pages
        # holding them stay shared between the workers after the fork.
        gc.freeze()
        try:
            for worker in team.others:
                worker.start()
            return eventloop.run(team.serve(loaded))
        finally:
            team.kill_remaining()


class _Team:
    """The first worker's view of the others: it passes its stop on and watches them exit."""

    def __init__(
        self, others: list[ForkProcess], metrics_directory: str, seal: CompensationSeal
    ) -> None:
        self.others = others
        self.metrics_directory = metrics_directory
        self.seal = seal
        self.stop = asyncio.Event()
        self.failed = False
        self._running = set(others)
        self._all_exited = asyncio.Event()

    async def serve(self, loaded: LoadedConfig) -> int:
        from idemproxy.server import serve

        loop = asyncio.get_running_loop()
        for worker in self.others:
            loop.add_reader(worker.sentinel, self._exited, worker)
        if not self._running:
            self._all_exited.set()
        pids = [os.getpid(), *(worker.pid for worker in self.others)]
        log.info("started %d workers", len(pids), extra={"pids": pids})
        try:
            # serve() sets ``stop`` on SIGTERM/SIGINT; the others drain alongside this one.
            stopping = asyncio.create_task(self._pass_stop_on())
            await serve(loaded, self.stop, reuse_port=True, seal=self.seal)
        finally:
            self.stop.set()
            await stopping
            await self._all_exited.wait()
        return 1 if self.failed else 0

    async def _pass_stop_on(self) -> None:
        await self.stop.wait()
        for worker in self._running:
            if worker.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGTERM)

    def _exited(self, worker: ForkProcess) -> None:
        asyncio.get_running_loop().remove_reader(worker.sentinel)
        worker.join()
        self._running.discard(worker)
        if worker.pid is not None:
            mark_process_dead(worker.pid, self.metrics_directory)  # type: ignore[no-untyped-call]
        if worker.exitcode != 0 or not self.stop.is_set():
            self.failed = True
            log.error(
                "worker %s exited with code %s; stopping the others", worker.pid, worker.exitcode
            )
            self.stop.set()
        if not self._running:
            self._all_exited.set()

    def kill_remaining(self) -> None:
        for worker in self.others:
            if worker.pid is not None and worker.exitcode is None:
                worker.kill()
                worker.join()


@contextlib.contextmanager
def _metrics_directory() -> Iterator[str]:
    _remove_stale_metrics_directories()
    directory = tempfile.mkdtemp(prefix=f"{METRICS_DIRECTORY_PREFIX}{os.getpid()}-")
    previous = os.environ.get(MULTIPROCESS_DIR_ENV)
    os.environ[MULTIPROCESS_DIR_ENV] = directory
    # prometheus_client picks where values live when first imported; this process may have
    # imported it already, and its series must reach the files like everyone else's.
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    try:
        yield directory
    finally:
        if previous is None:
            os.environ.pop(MULTIPROCESS_DIR_ENV, None)
        else:
            os.environ[MULTIPROCESS_DIR_ENV] = previous
        values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
        shutil.rmtree(directory, ignore_errors=True)


def _remove_stale_metrics_directories() -> None:
    """Remove what a killed ``serve`` left behind, so restarts do not fill a small /tmp.

    A directory is stale when the process named in it is gone, or is this very process: in a
    container every ``serve`` is pid 1, and a directory with our pid is a past run's.
    """
    for path in Path(tempfile.gettempdir()).glob(f"{METRICS_DIRECTORY_PREFIX}*-*"):
        pid = path.name.removeprefix(METRICS_DIRECTORY_PREFIX).partition("-")[0]
        if pid.isdigit() and (int(pid) == os.getpid() or not _running(int(pid))):
            shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _worker(loaded: LoadedConfig, seal: CompensationSeal) -> None:
    # Out of the terminal's process group: a Ctrl-C reaches the first worker alone, which
    # passes on one SIGTERM. Two signals would cut a worker's drain short.
    os.setpgrp()
    configure_logging(loaded.config.log_level)
    eventloop.run(_serve_until_orphaned(loaded, seal))


async def _serve_until_orphaned(loaded: LoadedConfig, seal: CompensationSeal) -> None:
    """Serve; a worker whose first worker was killed drains and exits instead of lingering."""
    from idemproxy.server import serve

    stop = asyncio.Event()
    first = multiprocessing.parent_process()
    loop = asyncio.get_running_loop()
    if first is not None:
        # The sentinel turns readable when the first worker exits, however it ends.
        loop.add_reader(first.sentinel, _orphaned, stop)
    try:
        await serve(loaded, stop, reuse_port=True, seal=seal)
    finally:
        if first is not None:
            loop.remove_reader(first.sentinel)


def _orphaned(stop: asyncio.Event) -> None:
    if not stop.is_set():
        log.error("the first worker is gone; this one drains and exits")
        stop.set()
