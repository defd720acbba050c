"""idemproxy against the reference minimal idempotency proxy, side by side in one run.

Starts nginx (the upstream, on 127.0.0.1:9001 where the reference forwards), the fake upstream
behind it for SSE and slow answers, a private Redis, ``idemproxy serve`` on that Redis and the
reference ``miniproxy.py`` (modes pass and redis) on the same Redis; drives each with wrk and
prints one markdown table. Everything stays on 127.0.0.1. Besides the HTTP cases, MCP
``tools/call`` first calls and replays go to idemproxy's MCP upstream (the shipped ``mcp``
pack) and to the reference as a plain keyed POST, on the same bytes (bench/toolcall.py says
what that compares).

Environment: DUR (wrk duration per cell, default 3s), WORKERS (idemproxy worker counts to
compare, default "1 2"), MEM=0 to skip the memory scenarios, HUGE_MB (default 100),
SSE_EVENTS (default 30000), CALLS (default 1000), MINIPROXY (path of miniproxy.py), REPEAT
(runs per cell, alternating between the proxies; the median counts; default 1),
LOOP=asyncio|uvloop (default: uvloop when installed; both proxies always run on the same loop),
MCP=0 to skip the MCP tools/call cases,
REPLICA=1 (give the Redis a replica, and measure the first worker count's external POSTs once
more with the store URL's wait_replicas=1, beside the same proxy without it).
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import os
import platform
import shutil
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis as redis_client
import toolcall
from load import Cell, CommandCounter, wrk
from memory import Footprint, footprints
from procs import Proc, cpu_s, ensure_tools, free_port, peak_rss_mib, port_taken
from report import Case, Row, print_report

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
UPSTREAM_PORT = 9001  # where miniproxy.py forwards, fixed
CONNS = (1, 32)
WAIT_QUERY = "?wait_replicas=1"  # with REPLICA=1

CASES = (
    Case("a", "safe GET pass-through", "get.lua", "/up/api/messages", "pass"),
    Case("b", "external POST, first call", "post.lua", "first", "redis"),
    Case("c", "external POST, replay", "post.lua", "replay", "redis"),
    Case("d", "1 MiB response, safe", "get.lua", "/up/api/big", "pass"),
    Case("d", "SSE 50 events x 20 ms, safe", "get.lua", "/up/api/stream", "pass"),
)
# Measured on every worker count; the other cases on the first one only.
EVERY_WORKER_COUNT = (*CASES[:3], *toolcall.CASES)

POLICY = """\
name: bench
routes:
  - name: read
    match: {methods: [GET, HEAD], path: "/{rest*}"}
    effect: safe
default: {name: post, effect: external}
"""


@dataclass
class Bench:
    workdir: Path
    duration: str
    redis_port: int
    run_id: str
    python: str
    loop: str
    redis_pid: int = 0
    replica_wait: bool = False  # a replica runs, and some cells wait for it
    mcp: bool = True  # measure the MCP tools/call cases

    def cell(self, base_url: str, case: Case, conns: int, pid: int | None = None) -> Cell:
        """One wrk run, with the Redis commands and CPU time it cost."""
        counter = CommandCounter(self.redis_port)
        try:
            # wrk's Lua random numbers repeat run after run: the run id keeps keys fresh.
            env = {**os.environ, "BENCH_RUN": f"{self.run_id}-{uuid.uuid4().hex[:8]}"}
            env["BENCH_PATH" if case.script == "get.lua" else "BENCH_MODE"] = case.target
            if case.target == "replay":
                record = toolcall.record_once if case.script == toolcall.SCRIPT else _record_once
                record(base_url, env["BENCH_RUN"])
            before, cpu_before = counter.snapshot(), cpu_s(pid) if pid else 0.0
            redis_before = cpu_s(self.redis_pid)
            cell = wrk(base_url, case.script, conns, self.duration, env)
            cpu = cpu_s(pid) - cpu_before if pid else 0.0
            redis_cpu = cpu_s(self.redis_pid) - redis_before
            return counter.per_request(before, cell, cpu, redis_cpu)
        finally:
            counter.close()


@dataclass(frozen=True)
class Served:
    """A proxy under test, running."""

    proc: Proc
    url: str
    mcp_url: str  # where its MCP server's tool calls go

    def target(self, case: Case) -> str:
        """The URL wrk drives for ``case`` (the MCP script takes its path from the URL)."""
        return self.mcp_url if case.script == toolcall.SCRIPT else self.url


def _record_once(base_url: str, run: str) -> None:
    """Make the record a replay cell replays, so that no cell starts with a race to claim it."""
    call = "replay-" + run
    headers = {"Content-Type": "application/json", "Idempotency-Key": call,
               "Idem-Batch": "b-" + run, "Idem-Tool-Call": call}  # fmt: skip
    body = b'{"content":"hello world"}'
    request = urllib.request.Request(base_url + "/up/api/messages", body, headers, method="POST")
    with urllib.request.urlopen(request, timeout=5) as answer:
        answer.read()


def _warm(url: str) -> None:
    for _ in range(20):
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5) as answer:
            answer.read()


def _wait_listening(proc: Proc, workers: int, timeout_s: float = 30.0) -> None:
    """The port opens with the first worker; measure only once every worker listens."""
    deadline = time.monotonic() + timeout_s
    while proc.log_path.read_text(errors="replace").count('"idemproxy listening"') < workers:
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: {workers} workers did not all start; see {proc.log_path}")
        time.sleep(0.05)


@contextlib.contextmanager
def _started(proc: Proc, port: int) -> Iterator[Proc]:
    proc.start(port)
    try:
        yield proc
    finally:
        proc.stop()


def _idemproxy(bench: Bench, stack: contextlib.ExitStack, workers: int, query: str = "") -> Served:
    port, admin_port = free_port(), free_port()
    policy = bench.workdir / "policy.yaml"
    policy.write_text(POLICY)
    name = f"idemproxy-{workers}" + ("-wait" if query else "")
    config = bench.workdir / f"{name}.yaml"
    config.write_text(
        f"listen: 127.0.0.1:{port}\nadmin_listen: 127.0.0.1:{admin_port}\nagent_id: bench\n"
        f"store: redis://127.0.0.1:{bench.redis_port}/0{query}\nupstreams:\n"
        f"  up: {{url: 'http://127.0.0.1:{UPSTREAM_PORT}', policy: '{policy}',"
        " max_connections: 1100}\n"
    )
    if bench.mcp:
        with config.open("a") as appended:
            appended.write(toolcall.upstream_config(f"http://127.0.0.1:{UPSTREAM_PORT}"))
    script = Path(bench.python).parent / "idemproxy"
    args = [str(script), "serve", "--config", str(config)]
    if workers > 1:
        args += ["--workers", str(workers)]
    proc = Proc(name, args, bench.workdir)
    if bench.loop == "asyncio":
        # A module that fails to import shadows uvloop, in the workers too.
        shadow = bench.workdir / "no-uvloop"
        shadow.mkdir(exist_ok=True)
        (shadow / "uvloop.py").write_text("raise ImportError('the bench runs on asyncio')\n")
        proc.env["PYTHONPATH"] = str(shadow)
    stack.enter_context(_started(proc, port))
    _wait_listening(proc, workers)
    _warm(f"http://127.0.0.1:{port}/up/api/messages")
    url = f"http://127.0.0.1:{port}"
    served = Served(proc, url, url + toolcall.IDEMPROXY_URL_PATH)
    if bench.mcp:
        # Proxies share the Redis and the agent: each checks with a tool call of its own.
        toolcall.check(served.mcp_url, f"{bench.run_id}-{uuid.uuid4().hex[:8]}")
    return served


def _upstreams(bench: Bench, stack: contextlib.ExitStack, tools: dict[str, str]) -> int:
    """Start nginx and the fake upstream behind it; return nginx's proxying port."""
    if port_taken(UPSTREAM_PORT):
        raise SystemExit(f"bench: port {UPSTREAM_PORT} is taken; stop what listens there")
    (bench.workdir / "big.bin").write_bytes(os.urandom(1 << 20))
    with (bench.workdir / "huge.bin").open("wb") as huge:
        huge.truncate(int(os.environ.get("HUGE_MB", "100")) * 1_000_000)
    fake_port, nginx_proxy_port = free_port(), free_port()
    fake = Proc(
        "fake-upstream",
        [bench.python, "-m", "tests.support.upstream", str(fake_port)],
        bench.workdir,
    )
    fake.env["PYTHONPATH"] = str(REPO)
    stack.enter_context(_started(fake, fake_port))
    conf = (HERE / "nginx.conf").read_text()
    for name, value in (
        ("DIR", bench.workdir),
        ("FAKE", fake_port),
        ("NGINX_PROXY", nginx_proxy_port),
    ):
        conf = conf.replace(f"@{name}@", str(value))
    (bench.workdir / "nginx.conf").write_text(conf)
    nginx = Proc(
        "nginx",
        [tools["nginx"], "-c", str(bench.workdir / "nginx.conf"), "-g", "daemon off;"],
        bench.workdir,
    )
    stack.enter_context(_started(nginx, UPSTREAM_PORT))
    return nginx_proxy_port


def _measure(
    bench: Bench, stack: contextlib.ExitStack, tools: dict[str, str]
) -> tuple[list[Row], list[Footprint]]:
    nginx_proxy_port = _upstreams(bench, stack, tools)
    redis_args = [tools["redis-server"], "--port", str(bench.redis_port), "--bind", "127.0.0.1",
                  "--save", "", "--appendonly", "no"]  # fmt: skip
    if bench.replica_wait:
        # The master syncs its replica at once rather than after the default 5 s wait.
        redis_args += ["--repl-diskless-sync-delay", "0"]
    redis = stack.enter_context(
        _started(Proc("redis", redis_args, bench.workdir), bench.redis_port)
    )
    bench.redis_pid = redis.pid
    if bench.replica_wait:
        _replica(bench, stack, redis_args)
    anchor = Case("-", "anchor", "post.lua", "first", "-")
    rows = [
        Row(
            f"anchor: {name}, POST",
            conns,
            bench.cell(f"http://127.0.0.1:{port}", anchor, conns),
            None,
        )
        for name, port in (("nginx direct", UPSTREAM_PORT), ("nginx proxy", nginx_proxy_port))
        for conns in CONNS
    ]
    references = {mode: _reference(bench, stack, mode) for mode in ("pass", "redis")}
    workers = [int(n) for n in os.environ.get("WORKERS", "1 2").split()]
    ours = {count: _idemproxy(bench, stack, count) for count in workers}
    waiting = _idemproxy(bench, stack, workers[0], WAIT_QUERY) if bench.replica_wait else None
    # Cell by cell, the reference and then each idemproxy, so that whatever else loads the
    # machine meanwhile falls on both sides alike.
    # With REPEAT=n each cell is run n times, alternating, and the median run (by req/s) counts.
    # A key of -N is the N-worker idemproxy that waits for the replica.
    runs: dict[tuple[int, Case, int], list[Cell]] = {}
    cases = (*CASES, *toolcall.CASES) if bench.mcp else CASES
    for case in cases:
        for conns in CONNS:
            served_now = [
                (count, served)
                for count, served in ours.items()
                if count == workers[0] or case in EVERY_WORKER_COUNT
            ]
            if waiting is not None and case in CASES[1:3]:
                # Only a claim waits: the safe cases would measure the same proxy twice.
                served_now.append((-workers[0], waiting))
            for repeat in range(int(os.environ.get("REPEAT", "1"))):
                reference = references[case.reference_mode]
                cell = bench.cell(reference.target(case), case, conns, reference.proc.pid)
                runs.setdefault((0, case, conns), []).append(cell)
                # Every other run the other way round, so that no idemproxy always goes first.
                for key, served in served_now if repeat % 2 == 0 else served_now[::-1]:
                    cell = bench.cell(served.target(case), case, conns, served.proc.pid)
                    runs.setdefault((key, case, conns), []).append(cell)
    cells = {key: _median(found) for key, found in runs.items()}
    for mode, reference in references.items():
        print(f"reference {mode}: peak RSS {peak_rss_mib(reference.proc.pid):.1f} MiB")
    peaks = {count: peak_rss_mib(served.proc.pid) for count, served in ours.items()}
    rows += [
        Row(
            f"({case.letter}) {case.title}",
            conns,
            ours_cell,
            cells[0, case, conns],
            workers=count,
            peak_rss_mib=peaks[count],
        )
        for count in workers
        for case in cases
        for conns in CONNS
        if (ours_cell := cells.get((count, case, conns))) is not None
    ]
    if waiting is not None:
        peak = peak_rss_mib(waiting.proc.pid)
        rows += [
            Row(
                f"({case.letter}) {case.title}, {WAIT_QUERY[1:]}",
                conns,
                ours_cell,
                cells[0, case, conns],
                workers=workers[0],
                peak_rss_mib=peak,
                replica_wait=True,
            )
            for case in CASES[1:3]
            for conns in CONNS
            if (ours_cell := cells.get((-workers[0], case, conns))) is not None
        ]
    memory: list[Footprint] = []
    if os.environ.get("MEM", "1") != "0":
        memory = _memory(ours[workers[0]])
    return rows, memory


def _replica(bench: Bench, stack: contextlib.ExitStack, master_args: list[str]) -> None:
    """A replica of the bench's Redis, synced before anything is measured."""
    port = free_port()
    args = [*master_args, "--replicaof", "127.0.0.1", str(bench.redis_port)]
    args[args.index("--port") + 1] = str(port)
    stack.enter_context(_started(Proc("redis-replica", args, bench.workdir), port))
    replica = redis_client.Redis(port=port)
    deadline = time.monotonic() + 30
    while replica.info("replication").get("master_link_status") != "up":
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: the replica did not sync; see {bench.workdir}")
        time.sleep(0.05)
    replica.close()


def _median(runs: list[Cell]) -> Cell:
    return sorted(runs, key=lambda cell: cell.req_s)[len(runs) // 2]


def _reference(bench: Bench, stack: contextlib.ExitStack, mode: str) -> Served:
    miniproxy = Path(os.environ.get("MINIPROXY", REPO.parent / "shared/bench/miniproxy.py"))
    if not miniproxy.exists():
        raise SystemExit(f"bench: the reference proxy {miniproxy} is missing; set MINIPROXY")
    port = free_port()
    args = [bench.python, str(HERE / "reference.py"), str(miniproxy), mode, str(port)]
    if bench.loop == "uvloop":
        args.append("uvloop")
    proc = Proc(f"miniproxy-{mode}", args, bench.workdir, BENCH_REDIS_PORT=str(bench.redis_port))
    stack.enter_context(_started(proc, port))
    _warm(f"http://127.0.0.1:{port}/up/api/messages")
    url = f"http://127.0.0.1:{port}"
    return Served(proc, url, url + toolcall.REFERENCE_URL_PATH)


def _memory(served: Served) -> list[Footprint]:
    return footprints(
        served.proc.pid,
        served.url,
        huge_mb=int(os.environ.get("HUGE_MB", "100")),
        sse_events=int(os.environ.get("SSE_EVENTS", "30000")),
        calls=int(os.environ.get("CALLS", "1000")),
    )


def _machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{stamp}; {os.cpu_count()} cores, {cpu}; Linux {platform.release()}"


def main() -> None:
    tools = ensure_tools()
    duration = os.environ.get("DUR", "3s")
    workdir = Path(tempfile.mkdtemp(prefix="idemproxy-bench-"))
    workdir.chmod(0o755)  # nginx workers run as another user and read the bodies from here
    loop = os.environ.get("LOOP") or ("uvloop" if importlib.util.find_spec("uvloop") else "asyncio")
    bench = Bench(workdir, duration, free_port(), uuid.uuid4().hex[:8], sys.executable, loop)
    bench.replica_wait = os.environ.get("REPLICA", "0") == "1"
    bench.mcp = os.environ.get("MCP", "1") != "0"
    print(f"bench: {_machine()}; {loop}; wrk -t1 -d{duration}; logs in {workdir}", flush=True)
    try:
        with contextlib.ExitStack() as stack:
            rows, memory = _measure(bench, stack, tools)
    except BaseException:
        print(f"bench: failed; logs kept in {workdir}", file=sys.stderr)
        raise
    print_report(rows, f"{_machine()}; event loop {loop}", duration, memory)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
