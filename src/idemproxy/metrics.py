"""Prometheus metrics (SPEC section 8): base units, bounded labels, never keys or raw paths.

The registry is injected so each proxy (and each test) owns its own series. Under several
workers (:mod:`idemproxy.workers`) each process writes its series to files in the directory
named by ``PROMETHEUS_MULTIPROC_DIR`` and every worker's registry reports the sum of them all.
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client import disable_created_metrics as _disable_created
from prometheus_client.multiprocess import MultiProcessCollector

from idemproxy import __version__

_disable_created()  # type: ignore[no-untyped-call]  # `_created` series double the cardinality and no dashboard reads them

_LATENCY_BUCKETS_S = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
)  # fmt: skip


class DuplicateKind(StrEnum):
    REPLAYED = "replayed"
    COALESCED = "coalesced"
    IN_PROGRESS = "in_progress"
    UNKNOWN = "unknown"
    REUSED_KEY = "reused_key"
    ALREADY_ACTED = "already_acted"  # a tool call's request that differs from what it did


MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"

M = TypeVar("M", Counter, Histogram)


class Children(Generic[M]):
    """A labelled metric's children, each looked up once.

    ``labels()`` takes a lock and checks its arguments on every call; on the request path the
    label sets are few (upstream x route x outcome), so each child is kept after its first use.
    """

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: M) -> None:
        self._metric: M = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r: CollectorRegistry | None = self.registry
        multiprocess_dir = os.environ.get(MULTIPROCESS_DIR_ENV)
        if multiprocess_dir and registry is None:
            # Series live in the shared files, so they join no registry of their own: the
            # collector reads every worker's files, this one's included.
            MultiProcessCollector(self.registry, path=multiprocess_dir)  # type: ignore[no-untyped-call]
            r = None
        self.requests = Counter(
            "idemproxy_requests",
            "Requests answered, by upstream, route and outcome.",
            ["upstream", "route", "outcome"],
            registry=r,
        )
        self.duplicates_blocked = Counter(
            "idemproxy_duplicates_blocked",
            "Repeats of an effect that were not forwarded, by kind.",
            ["upstream", "route", "kind"],
            registry=r,
        )
        self.request_duration = Histogram(
            "idemproxy_request_duration_seconds",
            "Time from request received to response headers sent.",
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.upstream_request_duration = Histogram(
            "idemproxy_upstream_request_duration_seconds",
            "Time for the upstream to answer with response headers.",
            ["upstream"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.inflight_requests = Gauge(
            "idemproxy_inflight_requests",
            "Requests being handled now.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.unknown_outcomes = Gauge(
            "idemproxy_unknown_outcomes",
            "Effects whose outcome is unknown and await review.",
            registry=r,
            multiprocess_mode="livemax",  # read from the shared store: each worker sees the same
        )
        self.fenced_writes = Counter(
            "idemproxy_fenced_writes",
            "Late writes from an attempt that no longer held its key, dropped.",
            registry=r,
        )
        self.store_errors = Counter(
            "idemproxy_store_errors", "Store operations that failed.", ["op"], registry=r
        )
        self.store_operation_duration = Histogram(
            "idemproxy_store_operation_duration_seconds",
            "Store operation latency.",
            ["op"],
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.agents_paused = Gauge(
            "idemproxy_agents_paused",
            "Agents whose effects are held until an operator resumes them.",
            registry=r,
            multiprocess_mode="livemax",  # read from the shared store: each worker sees the same
        )
        self.store_records_lost = Gauge(
            "idemproxy_store_records_lost",
            "1 while the store has lost records and no operator has acknowledged it.",
            registry=r,
            multiprocess_mode="livemax",  # read from the shared store: each worker sees the same
        )
        self.store_risk = Gauge(
            "idemproxy_store_risk",
            "1 while the store could lose records, by risk.",
            ["risk"],
            registry=r,
            multiprocess_mode="livemax",
        )
        self.agents_busy = Gauge(
            "idemproxy_agents_busy",
            "Agents the background loops visit each pass, by the work they may have.",
            ["work"],
            registry=r,
            multiprocess_mode="livemax",  # read from the shared store: each worker sees the same
        )
        self.agents_forgotten = Counter(
            "idemproxy_agents_forgotten",
            "Agents dropped from the agent registry past its cap (their records stay).",
            registry=r,
        )
        self.controller_events = Counter(
            "idemproxy_controller_events",
            "Events offered to the recovery controller, by result.",
            ["result"],
            registry=r,
        )
        self.controller_backlog = Gauge(
            "idemproxy_controller_backlog",
            "Events waiting for delivery to the recovery controller.",
            registry=r,
            multiprocess_mode="livemax",  # read from the shared store: each worker sees the same
        )
        # An Info is kept in memory only, so it joins the reporting registry in every mode.
        self.build_info = Info("idemproxy_build", "Build information.", registry=self.registry)
        self.build_info.info({"version": __version__})
