"""Prometheus metrics (SPEC section 8): base units, bounded labels, never keys or raw paths.

The registry is injected so each proxy (and each test) owns its own series. Under several
workers (:mod:`idemproxy.workers`) each process writes its series to files in the directory
named by ``PROMETHEUS_MULTIPROC_DIR`` and every worker's registry reports the sum of them all.

Two labels need a word:

- ``store_scope`` on the gauges read from the store (outcomes awaiting review, paused agents,
  the store's losses and risks, the controller backlog): ``shared`` when every proxy on the
  store reports the same value (Redis), ``pod`` when the store is this proxy's own (SQLite on
  the pod's volume, memory). A dashboard takes the max of ``shared`` series and sums ``pod``
  ones; an alert on a ``pod`` store names the pod, as that is where the operator must look.
- ``agent`` is an agent id, bounded by :class:`AgentLabels`: the configured ``agent_id`` and
  the first :data:`AGENT_LABELS_MAX` other agents this process sees get their own value, every
  later one :data:`OTHER_AGENTS`. A sidecar serves one agent, so it has one value.
"""

from __future__ import annotations

import os
from enum import StrEnum

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client import disable_created_metrics as _disable_created
from prometheus_client.multiprocess import MultiProcessCollector

from idemproxy import __version__
from idemproxy.duplicates import BlockedDuplicates

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
_SCOPE = "store_scope"

# Agents with a label of their own, besides the configured one: ample for the few agents one
# proxy serves, small enough that a proxy shared by an unbounded crowd stays cheap to scrape.
AGENT_LABELS_MAX = 20
# No agent id can be this: ids are printable ASCII without spaces (effectkeys.py).
OTHER_AGENTS = "other agents"


class StoreScope(StrEnum):
    """Who else reports what this proxy reads from its store (the ``store_scope`` label)."""

    POD = "pod"  # the store is this proxy's own: its pod's SQLite file, or memory
    SHARED = "shared"  # every proxy on the store reads the same records: Redis

    @classmethod
    def of(cls, backend: str) -> StoreScope:
        """The scope of a store by its backend (``Store.backend``)."""
        return cls.SHARED if backend == "redis" else cls.POD


class AgentLabels:
    """The ``agent`` label value of an agent id, from a bounded set.

    First come, first labelled, and kept: a label handed on to newer agents would have to drop
    the series of older ones, which multiprocess mode cannot do (each worker's file keeps every
    child it ever had), and a series that vanishes and comes back reads as a counter reset. The
    configured agent always has its label, however many others came first; who repeats among
    the agents past the limit is in ``idemproxy duplicates`` (idemproxy/duplicates.py).
    """

    __slots__ = ("_limit", "_named")

    def __init__(self, configured_agent: str, limit: int = AGENT_LABELS_MAX) -> None:
        self._named = {configured_agent}
        self._limit = limit + 1  # the configured agent is not one of the ``limit`` others

    def __call__(self, agent: str) -> str:
        if agent in self._named:
            return agent
        if len(self._named) < self._limit:
            self._named.add(agent)
            return agent
        return OTHER_AGENTS


class ScopedGauge:
    """A gauge whose every child carries the store's scope; callers give the other labels."""

    __slots__ = ("_gauge", "_scope")

    def __init__(self, gauge: Gauge, scope: StoreScope) -> None:
        self._gauge = gauge
        self._scope = scope.value

    def labels(self, *values: str) -> Gauge:
        return self._gauge.labels(*values, self._scope)


class Metrics:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        store_scope: StoreScope = StoreScope.POD,
        agent_id: str = "default",
    ) -> None:
        """``store_scope``: of the store the proxy uses; ``agent_id``: the configured agent."""
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
        self.agent_label = AgentLabels(agent_id)
        self.duplicates_blocked = Counter(
            "idemproxy_duplicates_blocked",
            "Repeats of an effect that were not forwarded, by kind and agent.",
            ["upstream", "route", "kind", "agent"],
            registry=r,
        )
        self.blocked = BlockedDuplicates(multiprocess_dir if r is None else None)
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
        scope = [_SCOPE]
        self.unknown_outcomes = Gauge(
            "idemproxy_unknown_outcomes",
            "Effects whose outcome is unknown and await review.",
            scope,
            registry=r,
            multiprocess_mode="livemax",  # read from the shared store: each worker sees the same
        ).labels(store_scope)
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
            scope,
            registry=r,
            multiprocess_mode="livemax",  # read from the shared store: each worker sees the same
        ).labels(store_scope)
        self.agent_paused = ScopedGauge(
            Gauge(
                "idemproxy_agent_paused",
                "Paused agents by agent: 1 for an agent of its own label, how many for others.",
                ["agent", _SCOPE],
                registry=r,
                multiprocess_mode="livemax",
            ),
            store_scope,
        )
        self.store_records_lost = Gauge(
            "idemproxy_store_records_lost",
            "1 while the store has lost records and no operator has acknowledged it.",
            scope,
            registry=r,
            multiprocess_mode="livemax",  # read from the shared store: each worker sees the same
        ).labels(store_scope)
        self.store_risk = ScopedGauge(
            Gauge(
                "idemproxy_store_risk",
                "1 while the store could lose records, by risk.",
                ["risk", _SCOPE],
                registry=r,
                multiprocess_mode="livemax",
            ),
            store_scope,
        )
        self.agents_in_error = ScopedGauge(
            Gauge(
                "idemproxy_agents_in_error",
                "Agents in error (ledger/agenterror.py) the sweep visits, by reason.",
                ["reason", _SCOPE],
                registry=r,
                multiprocess_mode="livemax",  # read from the shared store: each sees the same
            ),
            store_scope,
        )
        self.agent_error_seconds = ScopedGauge(
            Gauge(
                "idemproxy_agent_error_seconds",
                "How long the agent has been in error, 0 when it is not; the longest for others.",
                ["agent", _SCOPE],
                registry=r,
                multiprocess_mode="livemax",
            ),
            store_scope,
        )
        self.agent_failed_effects = Counter(
            "idemproxy_agent_failed_effects",
            "Effects of the agent whose outcome failed (an error status, unknown, not applied).",
            ["agent"],
            registry=r,
        )
        self.agents_busy = ScopedGauge(
            Gauge(
                "idemproxy_agents_busy",
                "Agents the background loops visit each pass, by the work they may have.",
                ["work", _SCOPE],
                registry=r,
                multiprocess_mode="livemax",  # read from the shared store: each sees the same
            ),
            store_scope,
        )
        self.agents_forgotten = Counter(
            "idemproxy_agents_forgotten",
            "Agents dropped from the agent registry past its cap (their records stay).",
            registry=r,
        )
        self.approvals = Counter(
            "idemproxy_approvals",
            "Effects held for approval, and what became of each: requested, approved, denied,"
            " expired, used.",
            ["upstream", "event"],
            registry=r,
        )
        self.approvals_waiting = Gauge(
            "idemproxy_approvals_waiting",
            "Held effects awaiting an operator's decision, as the sweep last counted them.",
            scope,
            registry=r,
            multiprocess_mode="livemax",
        ).labels(store_scope)
        self.controller_events = Counter(
            "idemproxy_controller_events",
            "Events offered to the recovery controller, by result.",
            ["result"],
            registry=r,
        )
        self.controller_backlog = Gauge(
            "idemproxy_controller_backlog",
            "Events waiting for delivery to the recovery controller.",
            scope,
            registry=r,
            multiprocess_mode="livemax",  # read from the shared store: each worker sees the same
        ).labels(store_scope)
        # An Info is kept in memory only, so it joins the reporting registry in every mode.
        self.build_info = Info("idemproxy_build", "Build information.", registry=self.registry)
        self.build_info.info({"version": __version__})
