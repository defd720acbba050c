"""``idemproxy serve`` in front of a recording upstream, with a trap no request may reach."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.listeners import ConnectionTrap, RecordingServer, recording_upstream
from tests.support.processes import ServedProxy, http_get, running
from tests.support.rawhttp import RawAnswer, exchange, request_bytes

MAX_BODY_BYTES = 1024
POLICY = f"""
name: abuse
routes:
  - name: read
    match: {{methods: [GET, HEAD, OPTIONS]}}
    effect: safe
default: {{name: write, max_body_bytes: {MAX_BODY_BYTES}, lease_ms: 1000, coalesce_wait_ms: 200}}
"""
UNHANDLED = ("Traceback", "Error handling request")


@dataclass
class Served:
    proxy: ServedProxy
    upstream: RecordingServer
    trap: ConnectionTrap

    def send(self, request: bytes, timeout_s: float = 10.0) -> RawAnswer | None:
        return exchange(self.proxy.port, request, timeout_s)

    def assert_still_serving(self) -> None:
        """The process runs, answers a plain effect, and has logged no unhandled error."""
        assert self.proxy.proc is not None
        assert self.proxy.proc.poll() is None
        headers: list[tuple[str | bytes, str | bytes]] = [("Idempotency-Key", "health")]
        answer = self.send(request_bytes("POST", "/up/health", headers, b"{}"))
        assert answer is not None
        assert answer.status == 200
        assert http_get(self.proxy.admin_url + "/healthz")[0] == 200
        log = self.proxy.output()
        assert not any(marker in log for marker in UNHANDLED), log[-3000:]
        assert self.trap.accepted == 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("abuse")
    policy = workdir / "policy.yaml"
    policy.write_text(POLICY)
    with recording_upstream() as upstream, ConnectionTrap() as trap:
        proxy = ServedProxy(
            workdir,
            "--upstream", f"up=http://127.0.0.1:{upstream.port}/api",
            "--policy", f"up={policy}",
            "--store", f"sqlite:///{workdir / 'effects.db'}",
        )  # fmt: skip
        with running(proxy):
            yield Served(proxy, upstream, trap)


def upstream_paths(served: Served) -> list[str]:
    return [received.path for received in served.upstream.recording.snapshot()]


def within_base(paths: list[str]) -> bool:
    return all(path == "/api" or path.startswith(("/api/", "/api?")) for path in paths)
