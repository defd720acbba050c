"""Several proxy processes on one listener, so a sidecar can use more than one core.

One event loop keeps one core busy at most. With ``workers: N`` (``--workers N``) the ``serve``
process becomes a supervisor: it starts N workers, each a whole proxy with its own connection
pools, all bound to the proxy and admin addresses with ``SO_REUSEPORT`` so that the kernel
spreads incoming connections over them.

- Exactly-once holds across workers because every decision is taken in the shared store.
  Duplicates on one worker wait for each other in memory; a duplicate on another worker finds
  the record in flight and polls the store until it settles, then replays it.
- ``/metrics`` on any worker reports the sum over all of them: workers write their series to
  files in a private directory (prometheus_client's multiprocess mode).
- SIGTERM or SIGINT to the supervisor reaches every worker once, and each drains as a single
  proxy does. A worker that exits on its own stops the others and the supervisor exits 1, so
  the container restarts whole instead of running on with fewer workers than configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from multiprocessing.connection import wait
from multiprocessing.context import SpawnProcess
from types import FrameType

from prometheus_client.multiprocess import mark_process_dead

from idemproxy import eventloop
from idemproxy.config import LoadedConfig
from idemproxy.logs import configure_logging
from idemproxy.metrics import MULTIPROCESS_DIR_ENV

log = logging.getLogger(__name__)


def run_workers(loaded: LoadedConfig) -> int:
    """Run ``loaded.config.workers`` proxies until a signal; the exit code for the command."""
    count = loaded.config.workers
    with _metrics_directory() as directory:
        # Spawned, not forked: each worker imports prometheus_client afresh and so sees the
        # directory, and inherits no event loop or open connection from this process.
        context = multiprocessing.get_context("spawn")
        workers = [
            context.Process(target=_worker, args=(loaded,), name=f"idemproxy-worker-{index}")
            for index in range(count)
        ]
        supervisor = _Supervisor(workers, directory)
        try:
            return supervisor.run()
        finally:
            supervisor.kill_remaining()


class _Supervisor:
    def __init__(self, workers: list[SpawnProcess], metrics_directory: str) -> None:
        self.workers = workers
        self.metrics_directory = metrics_directory
        self.stopping = False

    def run(self) -> int:
        for worker in self.workers:
            worker.start()
        # Installed once every worker exists, so that each one gets the SIGTERM. A signal
        # during start-up ends this process at once, and the workers see themselves orphaned.
        previous = {
            signum: signal.signal(signum, self.on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            log.info("started %d workers", len(self.workers), extra={"pids": self.pids()})
            return self.wait()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def pids(self) -> list[int | None]:
        return [worker.pid for worker in self.workers]

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Ask every worker, once, to drain and exit."""
        if self.stopping:
            return
        self.stopping = True
        for worker in self.workers:
            if worker.pid is not None and worker.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signal.SIGTERM)

    def wait(self) -> int:
        """Block until every worker has exited; 1 if any failed or exited unasked."""
        failed = False
        running = list(self.workers)
        while running:
            ready = wait([worker.sentinel for worker in running])
            for worker in [w for w in running if w.sentinel in ready]:
                worker.join()
                running.remove(worker)
                if worker.pid is not None:
                    mark_process_dead(worker.pid, self.metrics_directory)  # type: ignore[no-untyped-call]
                if worker.exitcode != 0 or not self.stopping:
                    failed = True
                    log.error(
                        "worker %s exited with code %s; stopping the others",
                        worker.pid,
                        worker.exitcode,
                    )
                    self.stop()
        return 1 if failed else 0

    def kill_remaining(self) -> None:
        for worker in self.workers:
            if worker.exitcode is None and worker.pid is not None:
                worker.kill()
                worker.join()


@contextlib.contextmanager
def _metrics_directory() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="idemproxy-metrics-")
    previous = os.environ.get(MULTIPROCESS_DIR_ENV)
    os.environ[MULTIPROCESS_DIR_ENV] = directory
    try:
        yield directory
    finally:
        if previous is None:
            os.environ.pop(MULTIPROCESS_DIR_ENV, None)
        else:
            os.environ[MULTIPROCESS_DIR_ENV] = previous
        shutil.rmtree(directory, ignore_errors=True)


def _worker(loaded: LoadedConfig) -> None:
    # Out of the terminal's process group: a Ctrl-C reaches the supervisor alone, which passes
    # on one SIGTERM. Two signals would cut a worker's drain short.
    os.setpgrp()
    configure_logging(loaded.config.log_level)
    eventloop.run(_serve_until_orphaned(loaded))


async def _serve_until_orphaned(loaded: LoadedConfig) -> None:
    """Serve; a worker whose supervisor was killed drains and exits instead of lingering."""
    from idemproxy.server import serve

    stop = asyncio.Event()
    supervisor = multiprocessing.parent_process()
    loop = asyncio.get_running_loop()
    if supervisor is not None:
        # The sentinel turns readable when the supervisor exits, however it ends.
        loop.add_reader(supervisor.sentinel, _orphaned, stop)
    try:
        await serve(loaded, stop, reuse_port=True)
    finally:
        if supervisor is not None:
            loop.remove_reader(supervisor.sentinel)


def _orphaned(stop: asyncio.Event) -> None:
    if not stop.is_set():
        log.error("the supervisor is gone; this worker drains and exits")
        stop.set()
