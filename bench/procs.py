"""Processes the bench starts, the tools it needs, and how much memory a process holds."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

STARTUP_S = 20.0
# Debian packages that provide each tool the bench drives.
PACKAGES = {"wrk": "wrk", "nginx": "nginx-light", "redis-server": "redis-server"}


def ensure_tools() -> dict[str, str]:
    """The path of each tool, installed from Debian's packages when missing (needs root)."""
    missing = [tool for tool in PACKAGES if find_tool(tool) is None]
    if missing:
        if os.geteuid() != 0:
            names = " ".join(PACKAGES[tool] for tool in missing)
            raise SystemExit(f"bench: {', '.join(missing)} missing; apt-get install {names}")
        print(f"bench: installing {', '.join(missing)} (Debian packages)", flush=True)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        packages = [PACKAGES[tool] for tool in missing]
        subprocess.run(["apt-get", "install", "-y", "-qq", *packages], check=True, env=env)
    found = {tool: find_tool(tool) for tool in PACKAGES}
    return {tool: path for tool, path in found.items() if path is not None}


def find_tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for_port(port: int, timeout_s: float = STARTUP_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_taken(port):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


class Proc:
    """A child process with its output in a log file, stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, name: str, args: list[str], log_dir: Path, **env: str) -> None:
        self.name = name
        self.args = args
        self.log_path = log_dir / f"{name}.log"
        self.env = {**os.environ, **env}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, port: int | None = None) -> Proc:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, env=self.env
            )
        if port is not None:
            try:
                wait_for_port(port)
            except TimeoutError:
                self.stop()
                raise SystemExit(f"bench: {self.name} did not start; see {self.log_path}") from None
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def family(pid: int) -> list[int]:
    """``pid`` and all its descendants (worker processes)."""
    pids = [pid]
    for current in pids:
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                pids += [int(child) for child in task.read_text().split()]
    return pids


def status_kib(pid: int, field: str) -> int:
    """A ``VmRSS``/``VmHWM`` figure of ``/proc/<pid>/status`` in KiB (0 once it is gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    """CPU time (user + system) ``pid`` and its workers have used so far."""
    ticks = 0
    for member in family(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{member}/stat").read_text().rpartition(")")[2].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` and its workers, now."""
    return sum(status_kib(p, "VmRSS") for p in family(pid)) / 1024


def peak_rss_mib(pid: int) -> float:
    """The largest resident set any one process of ``pid``'s family has had (VmHWM)."""
    return max(status_kib(p, "VmHWM") for p in family(pid)) / 1024
