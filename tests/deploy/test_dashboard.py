"""The Grafana dashboard the chart ships: its ConfigMap, what it shows, and a layout without
overlaps."""

from __future__ import annotations

import json
from typing import Any

from .tooling import (
    CHART_DIR,
    KNOWN_METRICS,
    RELEASE,
    render,
)
from .values import (
    ALL_ON,
    metric_names,
)


def dashboard_json() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CHART_DIR / "dashboards" / "idemproxy.json").read_text())
    return loaded


def test_dashboard_configmap_ships_the_chart_dashboard() -> None:
    configmap = render(ALL_ON).named("ConfigMap", f"{RELEASE}-idemproxy-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["namespace"] == "monitoring"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "Agents"}
    assert json.loads(configmap["data"]["idemproxy.json"]) == dashboard_json()


# Gauges read from the store, which every pod on a shared store reports alike.
STORE_READ_GAUGES = frozenset(
    {
        "idemproxy_unknown_outcomes",
        "idemproxy_agents_paused",
        "idemproxy_agent_paused",
        "idemproxy_agents_in_error",
        "idemproxy_agent_error_seconds",
        "idemproxy_store_records_lost",
        "idemproxy_store_risk",
        "idemproxy_controller_backlog",
    }
)


def test_dashboard_shows_what_operators_look_for() -> None:
    dashboard = dashboard_json()
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    exprs = {p["title"]: [t["expr"] for t in p["targets"]] for p in panels}
    for title in (
        "Duplicates blocked by upstream and kind",
        "Unknown outcomes awaiting review",
        "Request latency (through the proxy)",
        "Upstream latency by upstream",
        "Controller backlog",
        "Store errors by operation",
        "Duplicates blocked by agent",
        "Paused agents",
        "Agents paused",
        "Store at risk and records lost",
        "Agents in error",
        "Time in error by agent",
        "Failed effects by agent",
    ):
        assert title in exprs, title
    assert "sum by (upstream, kind)" in exprs["Duplicates blocked by upstream and kind"][0]
    assert "sum by (agent, kind)" in exprs["Duplicates blocked by agent"][0]
    assert "idemproxy_agent_paused" in exprs["Paused agents"][0]
    assert "sum by (reason)" in exprs["Agents in error"][0]
    assert "idemproxy_agent_error_seconds" in exprs["Time in error by agent"][0]
    assert "sum by (agent)" in exprs["Failed effects by agent"][0]
    for title in ("Request latency (through the proxy)", "Upstream latency by upstream"):
        assert all(e.startswith("histogram_quantile(") and "_bucket{" in e for e in exprs[title])
    for title, queries in exprs.items():
        for query in queries:
            assert metric_names(query) <= KNOWN_METRICS, (title, query)
            assert 'namespace=~"$namespace"' in query, (title, query)
            if metric_names(query) & STORE_READ_GAUGES:
                # Once per store: a pod's own by pod, a shared one once (not once per pod).
                assert 'store_scope="pod"' in query, (title, query)
                assert 'store_scope="shared"' in query, (title, query)


def test_dashboard_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = dashboard_json()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]
