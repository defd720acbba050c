"""The sidecar the chart renders: a native sidecar started after its config check, its
listeners and probes, the restricted pod security standard, its volumes and its shutdown."""

from __future__ import annotations

from typing import Any

import pytest

from idemproxy.config.settings import ConsoleReach, ProxyConfig

from .tooling import (
    config_file,
    container,
    render,
    render_error,
    restricted_violations,
)
from .values import (
    ALL_ON,
    SINGLE_PVC,
    VALUE_SETS,
    agent_pod,
    merged,
)


@pytest.mark.parametrize("name", ["defaults", "all-on", "production", "single-pvc"])
def test_sidecar_is_a_native_sidecar_init_container(name: str) -> None:
    _, spec = agent_pod(VALUE_SETS[name])
    init_names = [c["name"] for c in spec["initContainers"]]
    assert init_names[-1] == "idemproxy"
    assert "idemproxy" not in [c["name"] for c in spec["containers"]]
    sidecar = container(spec, "idemproxy")
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["args"][:1] == ["serve"]
    assert sidecar["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_config_check_runs_to_completion_before_the_sidecar_starts() -> None:
    _, spec = agent_pod()
    check = spec["initContainers"][0]
    assert check["name"] == "idemproxy-check-config"
    assert check["args"] == ["check-config", "/etc/idemproxy/config.yaml"]
    # A plain init container: the pod stops at Init:Error with the message in its status.
    assert "restartPolicy" not in check
    assert check["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert check["volumeMounts"] == container(spec, "idemproxy")["volumeMounts"]

    _, without = agent_pod({"sidecar": {"checkConfig": False}})
    assert [c["name"] for c in without["initContainers"]] == ["idemproxy"]


@pytest.mark.parametrize(("proxy_port", "admin_port"), [(8080, 9090), (18080, 19090)])
def test_proxy_listens_on_loopback_and_admin_on_all_interfaces(
    proxy_port: int, admin_port: int
) -> None:
    values = merged(ALL_ON, {"sidecar": {"proxyPort": proxy_port, "adminPort": admin_port}})
    rendered, spec = agent_pod(values)
    config = config_file(rendered)
    assert config["listen"] == f"127.0.0.1:{proxy_port}"
    assert config["admin_listen"] == f"0.0.0.0:{admin_port}"
    sidecar = container(spec, "idemproxy")
    # Only the admin port is declared: nothing outside the pod is meant to reach the proxy.
    assert sidecar["ports"] == [
        {"name": "idem-admin", "containerPort": admin_port, "protocol": "TCP"}
    ]
    agent_env = {e["name"]: e.get("value") for e in container(spec, "agent")["env"]}
    assert agent_env["DISCORD_BASE_URL"] == f"http://127.0.0.1:{proxy_port}/discord"
    assert agent_env["BILLING_BASE_URL"] == f"http://127.0.0.1:{proxy_port}/billing"


def test_probes_hit_the_admin_port() -> None:
    _, spec = agent_pod(merged(ALL_ON, {"sidecar": {"adminPort": 9191}}))
    sidecar = container(spec, "idemproxy")
    port_names = {p["name"]: p["containerPort"] for p in sidecar["ports"]}
    probes = {
        kind: sidecar[f"{kind}Probe"]["httpGet"] for kind in ("startup", "liveness", "readiness")
    }
    assert {kind: probe["path"] for kind, probe in probes.items()} == {
        "startup": "/healthz",
        "liveness": "/healthz",
        "readiness": "/readyz",
    }
    for probe in probes.values():
        assert port_names[probe["port"]] == 9191


@pytest.mark.parametrize("name", ["defaults", "all-on", "production", "single-pvc"])
def test_pod_meets_the_restricted_pod_security_standard(name: str) -> None:
    _, spec = agent_pod(VALUE_SETS[name])
    assert restricted_violations(spec) == []
    assert spec["securityContext"]["runAsUser"] == 10001
    assert spec["automountServiceAccountToken"] is False


def test_writable_paths_are_volumes_matching_the_image() -> None:
    _, spec = agent_pod()
    mounts = {m["mountPath"]: m for m in container(spec, "idemproxy")["volumeMounts"]}
    assert mounts["/etc/idemproxy"]["readOnly"] is True
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/var/lib/idemproxy"]["name"]]
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    store = config_file(render())["store"]
    assert store == "sqlite:////var/lib/idemproxy/idemproxy.db"


def test_existing_claim_holds_the_store_for_a_single_replica() -> None:
    rendered, spec = agent_pod(SINGLE_PVC)
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["idemproxy-state"]["persistentVolumeClaim"] == {"claimName": "idemproxy-state"}
    assert rendered.one("Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    error = render_error(merged(SINGLE_PVC, {"exampleAgent": {"replicas": 2}}))
    assert "exampleAgent.replicas must be 0 or 1" in error


# --- shutdown ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sidecar", "grace"),
    [
        ({}, 35),
        ({"shutdownTimeoutS": 60, "agentShutdownS": 0}, 65),
        ({"shutdownTimeoutS": 45, "agentShutdownS": 30, "terminationGracePeriodSeconds": 90}, 90),
    ],
)
def test_shutdown_timeout_stays_below_the_grace_period(sidecar: dict[str, Any], grace: int) -> None:
    rendered, spec = agent_pod({"sidecar": sidecar})
    assert spec["terminationGracePeriodSeconds"] == grace
    assert config_file(rendered)["shutdown_timeout_s"] < grace


@pytest.mark.parametrize(("sidecar", "workers"), [({}, 1), ({"workers": 2}, 2)])
def test_workers_reach_the_config(sidecar: dict[str, Any], workers: int) -> None:
    rendered, _ = agent_pod({"sidecar": sidecar})
    assert config_file(rendered)["workers"] == workers


def test_a_grace_period_too_short_for_the_shutdown_timeout_is_refused() -> None:
    error = render_error({"sidecar": {"shutdownTimeoutS": 30, "terminationGracePeriodSeconds": 30}})
    assert "sidecar.terminationGracePeriodSeconds (30) must be at least" in error
    assert "+ sidecar.shutdownTimeoutS (30) + 5 = 45" in error


@pytest.mark.parametrize(
    ("sidecar", "console"),
    [
        ({}, "loopback"),
        ({"console": "any"}, "any"),
        ({"console": "off"}, "off"),
        ({"console": False}, "off"),  # a bare `off` in a values file
    ],
)
def test_the_console_setting_reaches_the_config(sidecar: dict[str, Any], console: str) -> None:
    """Loopback by default: `kubectl port-forward` reaches it, the pod network does not."""
    rendered, _ = agent_pod({"sidecar": sidecar})
    assert config_file(rendered)["console"] == console
    assert ProxyConfig.model_validate(config_file(rendered)).console == ConsoleReach(console)
