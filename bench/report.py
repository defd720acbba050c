"""The bench's printed table and the targets it is held to (docs/performance.md)."""

from __future__ import annotations

from dataclasses import dataclass

from load import Cell
from memory import Footprint


@dataclass(frozen=True)
class Case:
    letter: str
    title: str
    script: str  # wrk Lua script in bench/
    target: str  # get.lua: the path to GET; post.lua: "first" or "replay"
    reference_mode: str  # the miniproxy.py mode that gives the matching figure


@dataclass(frozen=True)
class Row:
    label: str
    conns: int
    ours: Cell
    reference: Cell | None
    workers: int = 0  # 0: not idemproxy (an anchor)
    peak_rss_mib: float = 0.0
    replica_wait: bool = False  # its claims waited for a replica (REPLICA=1)


def _cell(cell: Cell | None) -> str:
    if cell is None:
        return "| | | | "
    cpu = f"{cell.cpu_us:,.0f}" if cell.cpu_us else ""
    return f"| {cell.req_s:,.0f} | {cell.p50_ms:.2f} | {cell.p99_ms:.2f} | {cpu} "


def _redis(cell: Cell | None) -> str:
    if cell is None:
        return ""
    return f"{cell.round_trips:.2f} / {cell.commands:.1f} / {cell.redis_cpu_us:,.0f}"


def print_report(rows: list[Row], machine: str, duration: str, memory: list[Footprint]) -> None:
    print(f"\nidemproxy vs reference miniproxy.py ({machine}; wrk -t1 -d{duration} per cell)\n")
    print(
        "| case | workers | conns | idemproxy req/s | p50 ms | p99 ms | CPU us/req"
        " | reference req/s | p50 ms | p99 ms | CPU us/req | ratio | p50 added ms"
        " | Redis trips / cmds / CPU us per req: idemproxy | reference |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ratio = added = ""
        if row.reference is not None and row.reference.req_s > 0:
            ratio = f"{row.ours.req_s / row.reference.req_s:.2f}x"
            added = f"{row.ours.p50_ms - row.reference.p50_ms:+.2f}"
        workers = str(row.workers) if row.workers else "-"
        print(
            f"| {row.label} | {workers} | {row.conns} {_cell(row.ours)}{_cell(row.reference)}"
            f"| {ratio} | {added} | {_redis(row.ours)} | {_redis(row.reference)} |"
        )
    bad = [row for row in rows if row.ours.bad or (row.reference and row.reference.bad)]
    for row in bad:
        reference_bad = row.reference.bad if row.reference else 0
        print(
            f"\nWARNING {row.label} c{row.conns}: {row.ours.bad} bad answers from idemproxy,"
            f" {reference_bad} from the reference"
        )
    print_replica_wait(rows)
    peaks = sorted(
        {(row.workers, row.peak_rss_mib) for row in rows if row.workers and not row.replica_wait}
    )
    print(
        "\nidemproxy peak RSS over the cells (largest process): "
        + ", ".join(f"{workers} worker(s) {peak:.1f} MiB" for workers, peak in peaks)
    )
    if memory:
        print(
            "\n| memory scenario (idemproxy, 1 worker) | RSS before MiB | peak MiB | growth MiB"
            " | took s | result |\n|---|---:|---:|---:|---:|---|"
        )
        for f in memory:
            print(
                f"| {f.scenario} | {f.baseline_mib:.1f} | {f.peak_mib:.1f} | {f.growth_mib:.1f}"
                f" | {f.seconds:.1f} | {f.detail} |"
            )
    print("\n" + "\n".join(targets(rows, memory)))


def print_replica_wait(rows: list[Row]) -> None:
    """Each cell measured with wait_replicas=1 beside the same proxy without it."""
    waited = [row for row in rows if row.replica_wait]
    if not waited:
        return
    print(
        "\n| case | conns | no wait req/s | wait req/s | ratio | p50 ms no wait / wait"
        " | added ms | p99 ms no wait / wait | CPU us/req no wait / wait | Redis cmds / CPU us"
        " per req no wait / wait |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for row in waited:
        base = _find(rows, row.label[:3], row.conns, row.workers)
        if base is None:
            continue
        off, on = base.ours, row.ours
        ratio = f"{on.req_s / off.req_s:.2f}x" if off.req_s else ""
        print(
            f"| {base.label} | {row.conns} | {off.req_s:,.0f} | {on.req_s:,.0f} | {ratio}"
            f" | {off.p50_ms:.2f} / {on.p50_ms:.2f} | {on.p50_ms - off.p50_ms:+.2f}"
            f" | {off.p99_ms:.2f} / {on.p99_ms:.2f} | {off.cpu_us:,.0f} / {on.cpu_us:,.0f}"
            f" | {off.commands:.1f} / {off.redis_cpu_us:,.0f} - {on.commands:.1f}"
            f" / {on.redis_cpu_us:,.0f} |"
        )


def _find(rows: list[Row], letter_title: str, conns: int, workers: int = 1) -> Row | None:
    """The row of a case without a replica wait."""
    for row in rows:
        if (
            row.label.startswith(letter_title)
            and row.conns == conns
            and row.workers == workers
            and not row.replica_wait
        ):
            return row
    return None


def targets(rows: list[Row], memory: list[Footprint]) -> list[str]:
    """Each target of docs/performance.md, met or missed, with the figure."""
    lines = ["Targets (1 worker unless said):"]

    def check(name: str, met: bool, figure: str) -> None:
        lines.append(f"- {'MET   ' if met else 'MISSED'} {name}: {figure}")

    first, replay = _find(rows, "(b)", 32), _find(rows, "(c)", 32)
    first_c1, safe = _find(rows, "(b)", 1), _find(rows, "(a)", 32)
    if first and first.reference:
        ratio = first.ours.req_s / first.reference.req_s
        check("first call >= 1.0x reference throughput (c32)", ratio >= 1.0, f"{ratio:.2f}x")
    if first and replay:
        ratio = replay.ours.req_s / first.ours.req_s
        check("replay >= 1.3x own first call (c32)", ratio >= 1.3, f"{ratio:.2f}x")
    if first_c1 and first_c1.reference:
        added = first_c1.ours.p50_ms - first_c1.reference.p50_ms
        check(
            "p50 added over reference first call (c1) <= 0.15 ms", added <= 0.15, f"{added:+.3f} ms"
        )
    if first and replay and safe:
        trips = (first.ours.round_trips, replay.ours.round_trips, safe.ours.round_trips)
        met = abs(trips[0] - 2) < 0.05 and abs(trips[1] - 1) < 0.05 and trips[2] < 0.01
        check(
            "Redis round trips first/replay/safe = 2/1/0", met, "/".join(f"{t:.2f}" for t in trips)
        )
    for f in memory:
        if "concurrent" in f.scenario:
            check(
                f"peak RSS < 150 MiB with {f.scenario}", f.peak_mib < 150, f"{f.peak_mib:.1f} MiB"
            )
        else:
            check(
                f"RSS flat within 20 MiB: {f.scenario}",
                f.growth_mib <= 20,
                f"+{f.growth_mib:.1f} MiB",
            )
    return lines
