"""Real processes for end-to-end tests: `idemproxy serve`, the fake upstream, redis-server."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[2]
STARTUP_S = 15.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, timeout_s: float = STARTUP_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def http_get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class Process:
    """A child process whose output goes to a log file the test can show on failure."""

    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict[str, str]) -> None:
        self.name = name
        self.args = args
        self.log_path = log_dir / f"{name}.log"
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.args, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=REPO
        )
        log.close()

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def wait(self, timeout_s: float = 30.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout_s)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class UpstreamProcess(Process):
    """A fake upstream module of ``tests.support`` run as ``python -m MODULE PORT``."""

    def __init__(self, log_dir: Path, module: str, name: str) -> None:
        self.port = free_port()
        args = [sys.executable, "-m", module, str(self.port)]
        super().__init__(name, args, log_dir, dict(os.environ))

    def start(self) -> None:
        super().start()
        wait_for_port(self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class FakeUpstream(UpstreamProcess):
    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir, "tests.support.upstream", "upstream")

    def effects(self, path_suffix: str = "") -> list[dict[str, Any]]:
        _, body = http_get(f"{self.url}/_effects")
        effects: list[dict[str, Any]] = orjson.loads(body)
        return [e for e in effects if e["path"].endswith(path_suffix)]


class ServedProxy(Process):
    """`idemproxy serve` as a user runs it, from the installed console script."""

    def __init__(self, log_dir: Path, *extra_args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.admin_port = free_port()
        script = shutil.which("idemproxy", path=str(Path(sys.executable).parent))
        assert script is not None, "install the package first: pip install -e '.[dev]'"
        args = [
            script,
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--admin-listen",
            f"127.0.0.1:{self.admin_port}",
            *extra_args,
        ]
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPROXY_")}
        full_env.update(env or {})
        super().__init__("idemproxy", args, log_dir, full_env)

    @classmethod
    def for_upstream(
        cls,
        log_dir: Path,
        upstream_url: str,
        policy: Path,
        store: str,
        env: dict[str, str] | None = None,
    ) -> ServedProxy:
        """`serve` with the one upstream ``up`` at ``upstream_url``, under ``policy``, on
        ``store``: the set-up of most end-to-end tests."""
        return cls(
            log_dir,
            "--upstream", f"up={upstream_url}",
            "--policy", f"up={policy}",
            "--store", store,
            env=env,
        )  # fmt: skip

    def start(self) -> None:
        super().start()
        wait_for_port(self.admin_port)
        wait_for_port(self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"


class RedisServer(Process):
    """A private redis-server on its own port, so a test may stop and restart it."""

    def __init__(self, log_dir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        binary = shutil.which("redis-server")
        assert binary is not None, "redis-server is missing: apt-get install redis-server"
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(log_dir)]  # fmt: skip
        super().__init__(f"redis-{self.port}", args, log_dir, dict(os.environ))

    def start(self) -> None:
        super().start()
        wait_for_port(self.port)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@contextlib.contextmanager
def running(*processes: Process) -> Iterator[None]:
    """Start in order, stop in reverse; on failure print their logs into the test report."""
    started: list[Process] = []
    try:
        for process in processes:
            process.start()
            started.append(process)
        yield
    except BaseException:
        for process in started:
            print(f"----- {process.name} output -----\n{process.output()[-4000:]}")
        raise
    finally:
        for process in reversed(started):
            process.stop()
