"""The PodMonitor and the PrometheusRule: validated against the structural schemas in
tooling.py (the Prometheus Operator kinds are not in kubernetes-validate's set), and the alert
rules run through ``promtool check rules`` and ``promtool test rules``."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .tooling import (
    INSTALL_HINT,
    KNOWN_METRICS,
    NAMESPACE,
    container,
    render,
    require_executable,
)
from .values import (
    ALL_ON,
    VALUE_SETS,
    agent_pod,
    metric_names,
)


def test_pod_monitor_scrapes_the_admin_port_of_sidecar_pods() -> None:
    rendered, spec = agent_pod(ALL_ON)
    monitor = rendered.one("PodMonitor")
    pod_labels = rendered.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in container(spec, "idemproxy")["ports"]}
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def rule_groups(values: dict[str, Any]) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = render(values).one("PrometheusRule")["spec"]["groups"]
    return groups


def test_alerts_cover_what_operators_must_act_on() -> None:
    rules = {r["alert"]: r for g in rule_groups(ALL_ON) for r in g["rules"]}
    assert set(rules) == {
        "IdemproxyUnknownOutcomesAwaitingReview",
        "IdemproxyDuplicateSpike",
        "IdemproxyAgentPaused",
        "IdemproxyAgentInErrorTooLong",
        "IdemproxyControllerBacklog",
        "IdemproxyStoreErrors",
        "IdemproxyStoreRecordsLost",
        "IdemproxyStoreAtRisk",
    }
    for name, rule in rules.items():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        assert rule["for"], name
        assert {"summary", "description", "runbook_url"} <= rule["annotations"].keys(), name
        assert rule["annotations"]["runbook_url"] == (
            f"https://runbooks.example.com/idemproxy#{name.lower()}"
        )
        assert f'namespace="{NAMESPACE}"' in rule["expr"], name
        assert metric_names(rule["expr"]) <= KNOWN_METRICS, name
    assert rules["IdemproxyStoreErrors"]["labels"]["severity"] == "critical"
    assert (
        "idemproxy review resolve"
        in rules["IdemproxyUnknownOutcomesAwaitingReview"]["annotations"]["description"]
    )
    assert "idemproxy agent resume" in rules["IdemproxyAgentPaused"]["annotations"]["description"]
    in_error = rules["IdemproxyAgentInErrorTooLong"]
    assert "> 1800" in in_error["expr"]
    assert "idemproxy agent status AGENT" in in_error["annotations"]["description"]
    lost = rules["IdemproxyStoreRecordsLost"]
    assert lost["labels"]["severity"] == "critical"
    assert "idemproxy store acknowledge-loss" in lost["annotations"]["description"]
    at_risk = rules["IdemproxyStoreAtRisk"]["annotations"]["description"]
    assert "CONFIG SET maxmemory-policy noeviction" in at_risk
    assert "appendonly yes" in at_risk


def promtool() -> str:
    return require_executable(
        "promtool", f"{INSTALL_HINT}, which apt-installs Debian's prometheus package"
    )


def write_rules(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule_groups(values)}, sort_keys=False))
    return path


@pytest.mark.parametrize("name", ["all-on", "production"])
def test_alert_rules_pass_promtool_check(tmp_path: Path, name: str) -> None:
    rules = write_rules(tmp_path, VALUE_SETS[name])
    result = subprocess.run(
        [promtool(), "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


Series = list[tuple[str, str]]


def promtool_test_rules(tmp_path: Path, series: Series, alert_tests: list[dict[str, Any]]) -> None:
    """``promtool test rules`` of the ALL_ON alerts over ``series``, one sample a minute."""
    write_rules(tmp_path, ALL_ON)
    test_file = tmp_path / "rules_test.yaml"
    test_file.write_text(
        yaml.safe_dump(
            {
                "rule_files": ["rules.yaml"],
                "evaluation_interval": "1m",
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": [{"series": s, "values": v} for s, v in series],
                        "alert_rule_test": alert_tests,
                    }
                ],
            },
            sort_keys=False,
        )
    )
    result = subprocess.run(
        [promtool(), "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def expected_alert(alert: str, labels: dict[str, str], summary: str) -> dict[str, Any]:
    rules = {r["alert"]: r for g in rule_groups(ALL_ON) for r in g["rules"]}
    annotations = dict(rules[alert]["annotations"], summary=summary)
    return {"exp_labels": labels, "exp_annotations": annotations}


def test_alerts_fire_only_when_the_condition_lasts(tmp_path: Path) -> None:
    """Each pod on a store of its own (the chart's default SQLite): alerts name the pod."""
    expected = expected_alert
    pod = {"namespace": NAMESPACE, "pod": "bot-1"}
    own = 'store_scope="pod"'
    series = [
        # Two effects await review in one pod's store from minute 2 on, one in the other's;
        # another namespace is not ours.
        (f'idemproxy_unknown_outcomes{{namespace="agents",pod="bot-1",{own}}}', "0 0 2x40"),
        (f'idemproxy_unknown_outcomes{{namespace="agents",pod="bot-2",{own}}}', "0 0 1x40"),
        (f'idemproxy_unknown_outcomes{{namespace="other",pod="x",{own}}}', "5x40"),
        # 1/s replays of Discord messages: a spike. 0.1/s on Slack: below the threshold.
        (
            'idemproxy_duplicates_blocked_total{namespace="agents",pod="bot-1",agent="notes-bot",'
            'upstream="discord",route="create_message",kind="replayed"}',
            "0+60x40",
        ),
        (
            'idemproxy_duplicates_blocked_total{namespace="agents",pod="bot-2",agent="helper",'
            'upstream="slack",route="post_message",kind="replayed"}',
            "0+6x40",
        ),
        # One pod's agent paused at minute 2, none elsewhere.
        (
            f'idemproxy_agent_paused{{namespace="agents",pod="bot-1",agent="notes-bot",{own}}}',
            "0 0 1x40",
        ),
        (f'idemproxy_agent_paused{{namespace="agents",pod="bot-2",agent="helper",{own}}}', "0x40"),
        (f'idemproxy_agent_paused{{namespace="other",pod="x",agent="a",{own}}}', "1x40"),
        (f'idemproxy_controller_backlog{{namespace="agents",pod="bot-1",{own}}}', "500x40"),
        (f'idemproxy_controller_backlog{{namespace="agents",pod="bot-2",{own}}}', "50x40"),
        # One pod's agent in error from the start, past 30 minutes at minute 31; another's
        # error never lasts that long.
        (
            f'idemproxy_agent_error_seconds{{namespace="agents",pod="bot-1",agent="notes-bot",{own}}}',
            "0+60x40",
        ),
        (
            f'idemproxy_agent_error_seconds{{namespace="agents",pod="bot-2",agent="helper",{own}}}',
            "0+30x40",
        ),
        # One transient claim error, then sustained failures to complete.
        ('idemproxy_store_errors_total{namespace="agents",pod="bot-1",op="claim"}', "0 1x40"),
        ('idemproxy_store_errors_total{namespace="agents",pod="bot-1",op="complete"}', "0+30x40"),
        # One pod's store lost records at minute 3, acknowledged at minute 10.
        (f'idemproxy_store_records_lost{{namespace="agents",pod="bot-1",{own}}}', "0 0 0 1x6 0x30"),
        (f'idemproxy_store_records_lost{{namespace="agents",pod="bot-2",{own}}}', "0x40"),
        # Persistence off throughout; eviction only for five minutes, fixed in time.
        (
            f'idemproxy_store_risk{{namespace="agents",pod="bot-1",risk="no_persistence",{own}}}',
            "1x40",
        ),
        (
            f'idemproxy_store_risk{{namespace="agents",pod="bot-1",risk="eviction",{own}}}',
            "1x5 0x35",
        ),
    ]
    alert_tests: list[dict[str, Any]] = [
        {
            "eval_time": "8m",
            "alertname": "IdemproxyUnknownOutcomesAwaitingReview",
            "exp_alerts": [],
        },
        {
            "eval_time": "15m",
            "alertname": "IdemproxyUnknownOutcomesAwaitingReview",
            "exp_alerts": [
                expected(
                    "IdemproxyUnknownOutcomesAwaitingReview",
                    {"severity": "warning", **pod},
                    "2 effect(s) with an unknown outcome await review in agents/bot-1",
                ),
                expected(
                    "IdemproxyUnknownOutcomesAwaitingReview",
                    {"severity": "warning", "namespace": NAMESPACE, "pod": "bot-2"},
                    "1 effect(s) with an unknown outcome await review in agents/bot-2",
                ),
            ],
        },
        {"eval_time": "8m", "alertname": "IdemproxyDuplicateSpike", "exp_alerts": []},
        {
            "eval_time": "20m",
            "alertname": "IdemproxyDuplicateSpike",
            "exp_alerts": [
                expected(
                    "IdemproxyDuplicateSpike",
                    {
                        "severity": "warning",
                        "namespace": NAMESPACE,
                        "agent": "notes-bot",
                        "upstream": "discord",
                        "kind": "replayed",
                    },
                    "idemproxy blocks 1/s duplicate replayed calls of notes-bot to discord in"
                    " agents",
                )
            ],
        },
        {"eval_time": "2m", "alertname": "IdemproxyAgentPaused", "exp_alerts": []},
        {
            "eval_time": "4m",
            "alertname": "IdemproxyAgentPaused",
            "exp_alerts": [
                expected(
                    "IdemproxyAgentPaused",
                    {"severity": "warning", "agent": "notes-bot", **pod},
                    "1 agent(s) paused in agents/bot-1: notes-bot",
                )
            ],
        },
        {"eval_time": "33m", "alertname": "IdemproxyAgentInErrorTooLong", "exp_alerts": []},
        {
            "eval_time": "38m",
            "alertname": "IdemproxyAgentInErrorTooLong",
            "exp_alerts": [
                expected(
                    "IdemproxyAgentInErrorTooLong",
                    {"severity": "warning", "agent": "notes-bot", **pod},
                    "agent notes-bot in agents/bot-1 has been in error for 38m 0s",
                )
            ],
        },
        {"eval_time": "10m", "alertname": "IdemproxyControllerBacklog", "exp_alerts": []},
        {
            "eval_time": "20m",
            "alertname": "IdemproxyControllerBacklog",
            "exp_alerts": [
                expected(
                    "IdemproxyControllerBacklog",
                    {"severity": "warning", **pod},
                    "500 effect events wait for the recovery controller in agents/bot-1",
                )
            ],
        },
        {"eval_time": "3m", "alertname": "IdemproxyStoreRecordsLost", "exp_alerts": []},
        {
            "eval_time": "5m",
            "alertname": "IdemproxyStoreRecordsLost",
            "exp_alerts": [
                expected(
                    "IdemproxyStoreRecordsLost",
                    {"severity": "critical", **pod},
                    "idemproxy's store lost effect records in agents/bot-1: effects are refused",
                )
            ],
        },
        {"eval_time": "12m", "alertname": "IdemproxyStoreRecordsLost", "exp_alerts": []},
        {
            "eval_time": "20m",
            "alertname": "IdemproxyStoreAtRisk",
            "exp_alerts": [
                expected(
                    "IdemproxyStoreAtRisk",
                    {"severity": "warning", "risk": "no_persistence", **pod},
                    "idemproxy's store could lose effect records in agents/bot-1 (no_persistence)",
                )
            ],
        },
        {
            "eval_time": "12m",
            "alertname": "IdemproxyStoreErrors",
            "exp_alerts": [
                expected(
                    "IdemproxyStoreErrors",
                    {"severity": "critical", "op": "complete", **pod},
                    "idemproxy store operation complete fails in agents/bot-1",
                )
            ],
        },
    ]
    promtool_test_rules(tmp_path, series, alert_tests)


def test_on_a_shared_store_each_condition_fires_once_for_every_pod(tmp_path: Path) -> None:
    """Every pod on one Redis reports the same values: one alert, no pod, the store's value."""
    expected = expected_alert
    ns = {"namespace": NAMESPACE}
    series: Series = []
    for pod in ("bot-1", "bot-2", "bot-3"):
        labels = f'namespace="agents",pod="{pod}",store_scope="shared"'
        series += [
            (f"idemproxy_unknown_outcomes{{{labels}}}", "0 0 2x40"),
            (f'idemproxy_agent_paused{{{labels},agent="notes-bot"}}', "0 0 1x40"),
            (f'idemproxy_agent_paused{{{labels},agent="other agents"}}', "0 0 3x40"),
            (f"idemproxy_controller_backlog{{{labels}}}", "500x40"),
            (f"idemproxy_store_records_lost{{{labels}}}", "0 0 0 1x40"),
            (f'idemproxy_store_risk{{{labels},risk="eviction"}}', "1x40"),
        ]
    alert_tests: list[dict[str, Any]] = [
        {
            "eval_time": "15m",
            "alertname": "IdemproxyUnknownOutcomesAwaitingReview",
            "exp_alerts": [
                expected(
                    "IdemproxyUnknownOutcomesAwaitingReview",
                    {"severity": "warning", **ns},
                    "2 effect(s) with an unknown outcome await review in agents",
                )
            ],
        },
        {
            "eval_time": "4m",
            "alertname": "IdemproxyAgentPaused",
            "exp_alerts": [
                expected(
                    "IdemproxyAgentPaused",
                    {"severity": "warning", "agent": "notes-bot", **ns},
                    "1 agent(s) paused in agents: notes-bot",
                ),
                expected(
                    "IdemproxyAgentPaused",
                    {"severity": "warning", "agent": "other agents", **ns},
                    "3 agent(s) paused in agents: other agents",
                ),
            ],
        },
        {
            "eval_time": "20m",
            "alertname": "IdemproxyControllerBacklog",
            "exp_alerts": [
                expected(
                    "IdemproxyControllerBacklog",
                    {"severity": "warning", **ns},
                    "500 effect events wait for the recovery controller in agents",
                )
            ],
        },
        {
            "eval_time": "5m",
            "alertname": "IdemproxyStoreRecordsLost",
            "exp_alerts": [
                expected(
                    "IdemproxyStoreRecordsLost",
                    {"severity": "critical", **ns},
                    "idemproxy's store lost effect records in agents: effects are refused",
                )
            ],
        },
        {
            "eval_time": "20m",
            "alertname": "IdemproxyStoreAtRisk",
            "exp_alerts": [
                expected(
                    "IdemproxyStoreAtRisk",
                    {"severity": "warning", "risk": "eviction", **ns},
                    "idemproxy's store could lose effect records in agents (eviction)",
                )
            ],
        },
    ]
    promtool_test_rules(tmp_path, series, alert_tests)
