"""A real Prometheus scraping running ``idemproxy serve`` processes, with the chart's alert rules
and dashboard: each alert fires for its condition, naming the pod where the store is the pod's
own and firing once for a store the pods share, and every dashboard query returns data.

Two namespaces, as a cluster would have them: ``pods``, two proxies each on a SQLite store of
its own (the chart's default), and ``shared``, two proxies on one Redis. Prometheus scrapes and
evaluates every second; the rules are rendered from the chart with every ``for`` at 0s and
every threshold at 0, so that a condition fires at the next evaluation.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import yaml

from tests.deploy.tooling import CHART_DIR, render
from tests.support.processes import (
    FakeUpstream,
    RedisServer,
    ServedProxy,
    free_port,
    running,
)
from tests.support.prometheus import PrometheusServer, Target, eventually

pytestmark = pytest.mark.e2e

SECRET = "prometheus-test-webhook-secret"
PAUSED = "paused-bot"
AGENTS = {"s-1": "notes-bot-1", "s-2": "notes-bot-2", "r-1": "shared-bot", "r-2": "shared-bot"}
NAMESPACE = {"s-1": "pods", "s-2": "pods", "r-1": "shared", "r-2": "shared"}
AT_ONCE = {"for": "0s"}
RULE_VALUES: dict[str, Any] = {
    "prometheusRule": {
        "enabled": True,
        "unknownOutcomes": AT_ONCE,
        "duplicateSpike": {**AT_ONCE, "ratePerSecond": 0},
        "agentsPaused": AT_ONCE,
        "controllerBacklog": {**AT_ONCE, "threshold": 0},
        "storeErrors": {**AT_ONCE, "ratePerSecond": 0},
        "storeRecordsLost": AT_ONCE,
        "storeAtRisk": AT_ONCE,
    }
}
# What Grafana puts in place of the dashboard's variables, for "All" namespaces and pods.
ALL = {"$namespace": "pods|shared", "$pod": ".*", "$__rate_interval": "1m", "$__range": "1m"}
ALERT_LABELS = ("namespace", "pod", "agent", "upstream", "kind", "risk")


def rules_file(directory: Path, namespace: str) -> Path:
    """The chart's PrometheusRule for a release in ``namespace``, as a rules file."""
    rule = render(RULE_VALUES, namespace=namespace).one("PrometheusRule")
    path = directory / f"rules-{namespace}.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


def proxy(directory: Path, pod: str, store: str, upstream: str, controller: str) -> ServedProxy:
    """One pod's sidecar, pinned to its agent, with fast background loops."""
    config = {
        "agent_id": AGENTS[pod],
        "store": store,
        "upstreams": {"up": {"url": upstream}},
        "recovery": {"sweep_interval_s": 0.2},
        "store_safety": {"check_interval_s": 0.5},
        "controller": {"url": controller, "secret": SECRET, "poll_interval_s": 0.2},
    }
    path = directory / f"{pod}.yaml"
    path.write_text(yaml.safe_dump(config))
    served = ServedProxy(directory, "--config", str(path))
    served.name, served.log_path = pod, directory / f"{pod}.log"
    return served


def post(proxy: ServedProxy, path: str, call: str, agent: str | None = None) -> str:
    """One effect of the batch ``nightly``; the answer's Idem-Outcome."""
    headers = {"Idem-Batch": "nightly", "Idem-Tool-Call": call, "Content-Type": "application/json"}
    if agent is not None:
        headers["Idem-Agent"] = agent
    request = urllib.request.Request(
        f"{proxy.url}/up{path}", b'{"content": "hi"}', headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return str(answer.headers["Idem-Outcome"])
    except urllib.error.HTTPError as error:
        return str(error.headers["Idem-Outcome"])


def pause(proxy: ServedProxy, agent: str) -> None:
    body = orjson.dumps({"actor": "prometheus-test", "note": "alert check"})
    request = urllib.request.Request(
        f"{proxy.admin_url}/v1/agents/{agent}/pause",
        body,
        {"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def fired(prometheus: PrometheusServer, alert: str) -> list[dict[str, Any]]:
    """The firing alerts of that name, by the labels that tell them apart, and their value."""
    return [
        {name: a[name] for name in (*ALERT_LABELS, "value") if name in a}
        for a in prometheus.firing(alert)
    ]


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every target of every panel of the chart's dashboards."""
    found = []
    for path in sorted((CHART_DIR / "dashboards").glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            found += [(panel["title"], target["expr"]) for target in panel.get("targets", [])]
    return found


def dashboard_expr(title: str, **variables: str) -> str:
    """The (first) query of the panel titled so, with the variables Grafana would put in."""
    expr = next(e for t, e in dashboard_queries() if t == title)
    return substituted(expr, {**ALL, **variables})


def substituted(expr: str, variables: dict[str, str]) -> str:
    for name in sorted(variables, key=len, reverse=True):  # $__range before $__r...
        expr = expr.replace(name, variables[name])
    assert "$" not in expr, f"a dashboard variable the test does not know: {expr}"
    return expr


def values_by(result: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(item["metric"].get(label, "") for label in labels): float(item["value"][1])
        for item in result
    }


@pytest.fixture
def cluster(
    tmp_path: Path,
) -> Iterator[tuple[PrometheusServer, dict[str, ServedProxy], RedisServer]]:
    upstream = FakeUpstream(tmp_path)
    redis_server = RedisServer(tmp_path)  # no persistence: the shared store is at risk
    controller = f"http://127.0.0.1:{free_port()}/events"  # nothing listens: a backlog grows
    with running(upstream, redis_server):
        stores = {
            "s-1": f"sqlite:///{tmp_path}/s-1.db",
            "s-2": f"sqlite:///{tmp_path}/s-2.db",
            "r-1": redis_server.url,
            "r-2": redis_server.url,
        }
        proxies = {
            pod: proxy(tmp_path, pod, store, upstream.url, controller)
            for pod, store in stores.items()
        }
        targets = [
            Target(f"127.0.0.1:{p.admin_port}", NAMESPACE[pod], pod) for pod, p in proxies.items()
        ]
        rules = [rules_file(tmp_path, namespace) for namespace in ("pods", "shared")]
        prometheus = PrometheusServer(tmp_path, targets, rules)
        with running(*proxies.values(), prometheus):
            yield prometheus, proxies, redis_server


def make_conditions(proxies: dict[str, ServedProxy]) -> None:
    """Each pod's agent makes an effect and loses one (sent, then the connection dropped: its
    outcome is unknown); on the shared store the second pod's agent repeats the first's. An
    operator pauses another agent on one pod's own store, and on the shared one."""
    for pod in ("s-1", "s-2", "r-1"):
        assert post(proxies[pod], "/messages", "post-1") == "forwarded"
        assert post(proxies[pod], "/drop", "post-2") == "upstream-disconnected"
    assert post(proxies["r-2"], "/messages", "post-1") == "replayed"
    for pod in ("s-1", "r-1"):
        assert post(proxies[pod], "/messages", "p-1", agent=PAUSED) == "forwarded"
        pause(proxies[pod], PAUSED)


def alerts_while_repeating(
    prometheus: PrometheusServer, proxies: dict[str, ServedProxy]
) -> dict[str, list[dict[str, Any]]]:
    """Every pod's agent re-runs post-1 once more (a blocked duplicate), then the alerts."""
    for served in proxies.values():
        assert post(served, "/messages", "post-1") == "replayed"
    return {alert: fired(prometheus, alert) for alert in FIRST_ALERTS}


FIRST_ALERTS: dict[str, list[dict[str, Any]]] = {
    "IdemproxyUnknownOutcomesAwaitingReview": [
        {"namespace": "pods", "pod": "s-1", "value": 1.0},
        {"namespace": "pods", "pod": "s-2", "value": 1.0},
        {"namespace": "shared", "value": 1.0},  # one effect, though two pods report it
    ],
    "IdemproxyAgentPaused": [
        {"namespace": "pods", "pod": "s-1", "agent": PAUSED, "value": 1.0},
        {"namespace": "shared", "agent": PAUSED, "value": 1.0},
    ],
    "IdemproxyDuplicateSpike": [
        {"namespace": NAMESPACE[pod], "agent": AGENTS[pod], "upstream": "up", "kind": "replayed"}
        for pod in ("s-1", "s-2", "r-1")
    ],
    "IdemproxyControllerBacklog": [
        {"namespace": "pods", "pod": "s-1"},
        {"namespace": "pods", "pod": "s-2"},
        {"namespace": "shared"},
    ],
    "IdemproxyStoreAtRisk": [{"namespace": "shared", "risk": "no_persistence", "value": 1.0}],
    "IdemproxyStoreRecordsLost": [],
    "IdemproxyStoreErrors": [],
}


def without_rates(alerts: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The alerts in a stable order, without the values that change by the second (rates,
    backlogs)."""
    changing = {"IdemproxyDuplicateSpike", "IdemproxyControllerBacklog"}
    return {
        name: sorted(
            ({k: v for k, v in a.items() if k != "value" or name not in changing} for a in found),
            key=lambda a: json.dumps(a, sort_keys=True),
        )
        for name, found in alerts.items()
    }


def panel(prometheus: PrometheusServer, title: str, *labels: str, **variables: str) -> Any:
    """The values of the dashboard panel's query, by ``labels``."""
    return values_by(prometheus.query(dashboard_expr(title, **variables)), *labels)


def test_alerts_fire_for_their_condition_and_the_dashboard_shows_it(
    cluster: tuple[PrometheusServer, dict[str, ServedProxy], RedisServer],
) -> None:
    prometheus, proxies, redis_server = cluster
    make_conditions(proxies)

    now = eventually(
        lambda: without_rates(alerts_while_repeating(prometheus, proxies)),
        lambda found: found == without_rates(FIRST_ALERTS),
    )
    assert now == without_rates(FIRST_ALERTS)

    # The dashboard counts each store once: the two pods' own stores add up, the shared one
    # counts once however many pods report it; a pod's own store is named by its pod.
    unknown = "Unknown outcomes awaiting review"
    one_pod = {"$namespace": "pods", "$pod": "s-1"}
    assert panel(prometheus, unknown, **{"$namespace": "pods"}) == {(): 2.0}
    assert panel(prometheus, unknown, **{"$namespace": "shared"}) == {(): 1.0}
    assert panel(prometheus, unknown, **one_pod) == {(): 1.0}
    assert panel(prometheus, "Agents paused") == {(): 2.0}
    assert panel(prometheus, "Paused agents", "namespace", "pod", "agent") == {
        ("pods", "s-1", PAUSED): 1.0,
        ("shared", "", PAUSED): 1.0,
    }
    assert set(panel(prometheus, "Duplicates blocked by agent", "agent")) == {
        ("notes-bot-1",),
        ("notes-bot-2",),
        ("shared-bot",),
    }
    assert set(panel(prometheus, "Duplicates blocked by agent", "agent", **one_pod)) == {
        ("notes-bot-1",)
    }

    # The shared Redis is emptied under the proxies: both find the loss, one alert says it.
    redis.Redis(port=redis_server.port).flushall()
    lost = eventually(lambda: fired(prometheus, "IdemproxyStoreRecordsLost"), bool)
    assert lost == [{"namespace": "shared", "value": 1.0}]

    # Then it is gone: each pod on it fails its store calls, and says so under its own name.
    redis_server.kill()
    errors = eventually(
        lambda: {(a["namespace"], a["pod"]) for a in fired(prometheus, "IdemproxyStoreErrors")},
        lambda found: len(found) == 2,
    )
    assert errors == {("shared", "r-1"), ("shared", "r-2")}

    # Every query of the dashboard, and its variables, return data.
    for title, expr in dashboard_queries():
        assert prometheus.query(substituted(expr, ALL)), (title, expr)
    assert prometheus.label_values("namespace", "idemproxy_build_info") == ["pods", "shared"]
    assert prometheus.label_values("pod", 'idemproxy_build_info{namespace=~"pods"}') == [
        "s-1",
        "s-2",
    ]
