"""charts/idemproxy, rendered and linted offline with helm-python-sdk (Helm v4 as a library).

Every rendered object is validated against the Kubernetes 1.29 API (kubernetes-validate,
strict: unknown fields fail). The Prometheus Operator kinds are not in that schema set, so
PodMonitor and PrometheusRule are validated against the structural schemas in tooling.py
instead, and their alert rules go through ``promtool check rules`` and ``promtool test rules``.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from idemproxy.config.settings import ProxyConfig
from idemproxy.policies.base_url import misplaced_base_urls
from idemproxy.policies.loader import load_policy, parse_policy

from .tooling import (
    CHART_DIR,
    INSTALL_HINT,
    KNOWN_METRICS,
    NAMESPACE,
    RELEASE,
    REPO_ROOT,
    Manifest,
    Rendered,
    config_file,
    container,
    lint,
    lint_problems,
    pod_spec,
    render,
    render_error,
    require_executable,
    restricted_violations,
    validate_object,
)

ALL_OFF: dict[str, Any] = {
    "exampleAgent": {"enabled": False},
    "podMonitor": {"enabled": False},
    "prometheusRule": {"enabled": False},
    "grafanaDashboard": {"enabled": False},
}

ALL_ON: dict[str, Any] = {
    "exampleAgent": {"enabled": True},
    "podMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "prometheusRule": {
        "enabled": True,
        "labels": {"release": "kube-prometheus-stack"},
        "runbookUrl": "https://runbooks.example.com/idemproxy/",
    },
    "grafanaDashboard": {
        "enabled": True,
        "namespace": "monitoring",
        "annotations": {"grafana_folder": "Agents"},
    },
    "sidecar": {
        "upstreams": {
            "discord": {"url": "https://discord.com/api", "policy": "discord"},
            "billing": {"url": "https://billing.internal.example", "policy": "billing"},
        }
    },
    "policies": {
        "billing": {
            "routes": [
                {
                    "name": "create_invoice",
                    "match": {"method": "POST", "path": "/v1/invoices"},
                    "effect": "external",
                }
            ]
        }
    },
}

# Production: Redis through an existing Secret, several replicas, LLM and payment upstreams.
PRODUCTION: dict[str, Any] = {
    "image": {"digest": "sha256:" + "ab" * 32},
    "secrets": {"existingSecret": "idemproxy-prod", "storeUrlKey": "redis-url"},
    "sidecar": {
        "agentId": "support-bot",
        "logLevel": "warning",
        "shutdownTimeoutS": 45,
        "agentShutdownS": 30,
        "terminationGracePeriodSeconds": 90,
        "upstreams": {
            "stripe": {"url": "https://api.stripe.com"},
            "anthropic": {"url": "https://api.anthropic.com"},
            "slack": {"url": "https://slack.com", "policy": "slack"},
        },
        # A production Redis must keep its records across a restart (docs/reliability.md).
        "extraConfig": {"allow_agent_header": False, "store_safety": {"require_persistence": True}},
        "extraEnv": [
            {
                "name": "IDEMPROXY_CONTROLLER_SECRET",
                "valueFrom": {"secretKeyRef": {"name": "controller", "key": "hmac"}},
            }
        ],
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
    },
    "exampleAgent": {
        "replicas": 3,
        "image": {"repository": "registry.example.com/support-bot", "tag": "2.3.1"},
        "command": ["python", "-m", "support_bot"],
        "env": [{"name": "LOG_FORMAT", "value": "json"}],
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "agents", "operator": "Exists", "effect": "NoSchedule"}],
        "podAnnotations": {"team": "support"},
    },
    "podMonitor": {"enabled": True, "interval": "15s"},
    "prometheusRule": {"enabled": True},
}

# One replica on a PersistentVolumeClaim, a policy given as text (--set-file), no check.
SINGLE_PVC: dict[str, Any] = {
    "sidecar": {
        "checkConfig": False,
        "state": {"existingClaim": "idemproxy-state"},
        "upstreams": {"bluesky": {"url": "https://bsky.social/xrpc", "policy": "posts"}},
    },
    "policies": {"posts": "routes:\n  - name: create_post\n    effect: external\n"},
    "grafanaDashboard": {"enabled": True},
}

VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "all-on": ALL_ON,
    "all-off": ALL_OFF,
    "production": PRODUCTION,
    "single-pvc": SINGLE_PVC,
}


def merged(*layers: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge value layers the way Helm merges -f files (later wins)."""
    result: dict[str, Any] = {}
    for layer in layers:
        _merge_into(result, copy.deepcopy(layer))
    return result


def _merge_into(target: dict[str, Any], layer: dict[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = value


def agent_pod(values: dict[str, Any] | None = None) -> tuple[Rendered, Manifest]:
    rendered = render(values)
    return rendered, pod_spec(rendered.one("Deployment"))


def checksum(values: dict[str, Any]) -> str:
    template = render(values).one("Deployment")["spec"]["template"]
    annotation: str = template["metadata"]["annotations"]["checksum/idemproxy-config"]
    return annotation


# --- lint and schema validation -------------------------------------------------------------


@pytest.mark.parametrize("name", ["defaults", "all-on", "production", "single-pvc"])
def test_chart_lints_clean_in_strict_mode(name: str) -> None:
    assert lint_problems(lint(VALUE_SETS[name])) == []


@pytest.mark.parametrize("name", list(VALUE_SETS))
def test_every_rendered_object_is_valid_for_kubernetes_1_29(name: str) -> None:
    rendered = render(VALUE_SETS[name])
    assert rendered.objects
    for obj in rendered.objects:
        try:
            validate_object(obj)
        except Exception as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} ({name}): {exc}")


def test_all_on_renders_every_optional_part() -> None:
    kinds = {obj["kind"] for obj in render(ALL_ON).objects}
    assert kinds == {"ConfigMap", "Secret", "Deployment", "PodMonitor", "PrometheusRule"}
    assert len(render(ALL_ON).of_kind("ConfigMap")) == 2


def test_all_off_renders_only_what_a_sidecar_in_your_own_workload_needs() -> None:
    rendered = render(ALL_OFF)
    assert rendered.kinds() == [
        f"ConfigMap/{RELEASE}-idemproxy-config",
        f"Secret/{RELEASE}-idemproxy",
    ]


def test_image_tag_follows_the_app_version() -> None:
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert chart["kubeVersion"] == ">=1.29.0-0"
    assert values["image"]["tag"] == chart["appVersion"] == pyproject["project"]["version"]


# --- values schema ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"exampleagent": {"enabled": False}}, "additional properties 'exampleagent' not allowed"),
        (
            {"sidecar": {"shutdownTimeout": 5}},
            "additional properties 'shutdownTimeout' not allowed",
        ),
        (
            {"sidecar": {"upstreams": {"discord": {"url": "https://d", "polcy": "discord"}}}},
            "additional properties 'polcy' not allowed",
        ),
        ({"sidecar": {"shutdownTimeoutS": "20"}}, "got string, want integer"),
        ({"exampleAgent": {"replicas": 1.5}}, "want integer"),
        ({"podMonitor": {"enabled": "yes"}}, "got string, want boolean"),
        ({"sidecar": {"logLevel": "verbose"}}, "'/sidecar/logLevel'"),
        ({"sidecar": {"workers": 0}}, "'/sidecar/workers'"),
        ({"sidecar": {"upstreams": {"Discord": {"url": "https://d"}}}}, "Discord"),
        ({"sidecar": {"upstreams": {"discord": {"url": "discord.com"}}}}, "'/sidecar/upstreams"),
        ({"securityContext": {"runAsUser": 0}}, "'/securityContext/runAsUser'"),
        ({"prometheusRule": {"unknownOutcomes": {"for": "ten minutes"}}}, "'/prometheusRule"),
    ],
)
def test_a_values_typo_or_wrong_type_fails_with_the_schema_message(
    values: dict[str, Any], message: str
) -> None:
    error = render_error(values)
    assert "values don't meet the specifications of the schema" in error
    assert message in error
    assert any(message in problem for problem in lint_problems(lint(values)))


def test_an_unknown_policy_reference_fails_with_the_valid_names() -> None:
    error = render_error(
        {
            "sidecar": {"upstreams": {"billing": {"url": "https://b", "policy": "biling"}}},
            "policies": {"billing": {"routes": []}},
        }
    )
    assert 'sidecar.upstreams.billing.policy: "biling" is neither a shipped pack' in error
    assert "discord, bluesky, stripe, slack, openai, anthropic, generic" in error
    assert "nor a key of policies (billing)" in error


def test_extra_config_cannot_override_what_the_chart_sets() -> None:
    error = render_error({"sidecar": {"extraConfig": {"listen": "0.0.0.0:8080"}}})
    assert 'sidecar.extraConfig.listen: the chart sets "listen" itself' in error


# --- the sidecar -----------------------------------------------------------------------------


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


# --- config, policies and secrets --------------------------------------------------------------


def url_warnings(rendered: Rendered) -> list[str]:
    """What check-config (the chart's init container) warns about the rendered upstream URLs."""
    config = ProxyConfig.model_validate(config_file(rendered))
    configmap = rendered.named("ConfigMap", f"{RELEASE}-idemproxy-config")
    policies = {}
    for name in config.upstreams:
        ref = config.policy_ref(name)
        mounted = f"policy.{Path(ref).stem}.yaml"
        if ref.startswith("/etc/idemproxy/policies/") and mounted in configmap["data"]:
            policies[name] = parse_policy(configmap["data"][mounted], ref)
        else:
            policies[name] = load_policy(ref)
    urls = {name: upstream.url for name, upstream in config.upstreams.items()}
    return [problem.message() for problem in misplaced_base_urls(urls, policies)]


def commented_upstreams_example() -> dict[str, Any]:
    """The upstreams example commented out below ``upstreams: {}`` in values.yaml."""
    lines = (CHART_DIR / "values.yaml").read_text().splitlines()
    start = lines.index("  upstreams: {}") + 1
    example = []
    for line in lines[start:]:
        if not line.startswith("  #   "):
            break
        example.append(line.removeprefix("  #   "))
    assert example, "values.yaml lost its upstreams example"
    upstreams: dict[str, Any] = yaml.safe_load("\n".join(example))
    return upstreams


def example_values() -> dict[str, dict[str, Any]]:
    return {
        "readme install": yaml.safe_load(readme_block("# my-values.yaml")),
        "readme parent chart": yaml.safe_load(readme_block("# values.yaml of your agent chart"))[
            "idemproxy"
        ],
        "values.yaml comment": {"sidecar": {"upstreams": commented_upstreams_example()}},
        "production": PRODUCTION,
    }


@pytest.mark.parametrize(
    "name",
    ["readme install", "readme parent chart", "values.yaml comment", "production"],
)
def test_example_urls_stop_where_their_packs_routes_begin(name: str) -> None:
    assert url_warnings(render(example_values()[name])) == []


def test_a_url_that_hides_its_packs_routes_fails_that_check() -> None:
    values = {"sidecar": {"upstreams": {"discord": {"url": "https://discord.com/api/v10"}}}}
    (warning,) = url_warnings(render(values))
    assert "Use https://discord.com/api as the upstream's URL" in warning


def test_the_agent_gets_the_base_url_each_sdk_expects() -> None:
    values = merged(
        yaml.safe_load(readme_block("# my-values.yaml")),
        {"sidecar": {"upstreams": {"llm": {"url": "https://api.openai.com", "policy": "openai"}}}},
    )
    _, spec = agent_pod(values)
    agent_env = {e["name"]: e.get("value") for e in container(spec, "agent")["env"]}
    assert agent_env["DISCORD_BASE_URL"] == "http://127.0.0.1:8080/discord"
    # The OpenAI SDK's base URL holds the /v1 the pack's routes begin with.
    assert agent_env["OPENAI_BASE_URL"] == "http://127.0.0.1:8080/openai/v1"
    assert agent_env["LLM_BASE_URL"] == "http://127.0.0.1:8080/llm/v1"


def test_user_policies_are_mounted_where_the_config_points() -> None:
    rendered, spec = agent_pod(ALL_ON)
    config = config_file(rendered)
    configmap = rendered.named("ConfigMap", f"{RELEASE}-idemproxy-config")
    assert config["upstreams"] == {
        "discord": {"url": "https://discord.com/api", "policy": "discord"},
        "billing": {
            "url": "https://billing.internal.example",
            "policy": "/etc/idemproxy/policies/billing.yaml",
        },
    }
    volume = next(v for v in spec["volumes"] if v["name"] == "idemproxy-config")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    items = {item["path"]: item["key"] for item in volume["configMap"]["items"]}
    mount = next(
        m for m in container(spec, "idemproxy")["volumeMounts"] if m["name"] == "idemproxy-config"
    )
    billing_key = items[
        config["upstreams"]["billing"]["policy"].removeprefix(mount["mountPath"] + "/")
    ]
    assert yaml.safe_load(configmap["data"][billing_key]) == ALL_ON["policies"]["billing"]


def test_policy_given_as_text_is_mounted_verbatim() -> None:
    rendered = render(SINGLE_PVC)
    configmap = rendered.named("ConfigMap", f"{RELEASE}-idemproxy-config")
    assert configmap["data"]["policy.posts.yaml"] == SINGLE_PVC["policies"]["posts"]
    assert config_file(rendered)["upstreams"]["bluesky"]["policy"] == (
        "/etc/idemproxy/policies/posts.yaml"
    )


def test_a_policy_or_config_change_rolls_the_pods() -> None:
    base = checksum(ALL_ON)
    changed_policy = merged(ALL_ON)
    changed_policy["policies"]["billing"]["routes"][0]["effect"] = "safe"
    assert checksum(changed_policy) != base
    assert checksum(merged(ALL_ON, {"sidecar": {"logLevel": "debug"}})) != base
    assert checksum(merged(ALL_ON, {"policies": {"refunds": {"routes": []}}})) != base
    # Values that do not reach the sidecar's files leave running pods alone.
    assert checksum(merged(ALL_ON, {"exampleAgent": {"replicas": 4}})) == base
    assert checksum(merged(ALL_ON, {"podMonitor": {"interval": "1m"}})) == base


def test_store_url_and_admin_token_come_from_the_existing_secret() -> None:
    rendered, spec = agent_pod(PRODUCTION)
    assert rendered.of_kind("Secret") == []
    assert "store" not in config_file(rendered)
    for name in ("idemproxy-check-config", "idemproxy"):
        env = {e["name"]: e for e in container(spec, name)["env"]}
        assert env["IDEMPROXY_STORE"]["valueFrom"]["secretKeyRef"] == {
            "name": "idemproxy-prod",
            "key": "redis-url",
        }
        assert env["IDEMPROXY_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": "idemproxy-prod",
            "key": "admin-token",
        }
        assert "IDEMPROXY_CONTROLLER_SECRET" in env
    config = config_file(rendered)
    assert config["allow_agent_header"] is False
    assert config["store_safety"] == {"require_persistence": True}
    assert ProxyConfig.model_validate(config).store_safety.require_persistence
    assert container(spec, "idemproxy")["image"] == "idemproxy/idemproxy@sha256:" + "ab" * 32


def test_without_an_existing_secret_the_chart_generates_the_admin_token() -> None:
    rendered, spec = agent_pod()
    secret = rendered.one("Secret")
    env = {e["name"]: e for e in container(spec, "idemproxy")["env"]}
    ref = env["IDEMPROXY_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret["metadata"]["name"]
    assert len(secret["data"][ref["key"]]) >= 48
    assert "IDEMPROXY_STORE" not in env


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


# --- reuse from another chart ------------------------------------------------------------------


def readme_block(first_line: str) -> str:
    """The fenced yaml block of the chart README that starts with ``first_line``."""
    readme = (CHART_DIR / "README.md").read_text()
    for block in re.findall(r"```yaml\n(.*?)```", readme, flags=re.DOTALL):
        if block.startswith(first_line):
            return str(block)
    raise AssertionError(f"README.md has no yaml block starting with {first_line!r}")


def test_readme_snippet_adds_the_sidecar_to_an_existing_deployment(tmp_path: Path) -> None:
    parent = tmp_path / "my-agent"
    (parent / "templates").mkdir(parents=True)
    shutil.copytree(CHART_DIR, parent / "charts" / "idemproxy")
    (parent / "Chart.yaml").write_text(readme_block("# Chart.yaml of your agent chart"))
    (parent / "values.yaml").write_text(readme_block("# values.yaml of your agent chart"))
    (parent / "templates" / "deployment.yaml").write_text(
        readme_block("# templates/deployment.yaml of your agent chart")
    )

    rendered = render(chart_dir=parent)
    for obj in rendered.objects:
        validate_object(obj)
    assert lint_problems(lint(chart_dir=parent)) == []
    deployment = rendered.one("Deployment")
    assert deployment["metadata"]["name"] == f"{RELEASE}-agent"
    spec = pod_spec(deployment)
    assert container(spec, "idemproxy")["restartPolicy"] == "Always"
    assert restricted_violations(spec, containers=["idemproxy-check-config", "idemproxy"]) == []
    agent_env = {e["name"]: e["value"] for e in container(spec, "agent")["env"]}
    assert agent_env == {"DISCORD_API_BASE": "http://127.0.0.1:8080/discord"}

    # The parent's pod and the dependency's objects agree on names and keys.
    configmap = rendered.one("ConfigMap")
    secret = rendered.one("Secret")
    volume = next(v for v in spec["volumes"] if v["name"] == "idemproxy-config")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    token_ref = next(
        e for e in container(spec, "idemproxy")["env"] if e["name"] == "IDEMPROXY_ADMIN_TOKEN"
    )["valueFrom"]["secretKeyRef"]
    assert token_ref["name"] == secret["metadata"]["name"]
    assert token_ref["key"] in secret["data"]
    assert yaml.safe_load(configmap["data"]["config.yaml"])["upstreams"] == {
        "discord": {"url": "https://discord.com/api"}
    }
    # Same values, same checksum as the chart's own example Deployment.
    standalone = render(
        {
            "fullnameOverride": "",
            "sidecar": {"upstreams": {"discord": {"url": "https://discord.com/api"}}},
        }
    )
    assert (
        deployment["spec"]["template"]["metadata"]["annotations"]
        == standalone.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    )


# --- monitoring -----------------------------------------------------------------------------------


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
    lost = rules["IdemproxyStoreRecordsLost"]
    assert lost["labels"]["severity"] == "critical"
    assert "idemproxy store acknowledge-loss" in lost["annotations"]["description"]
    at_risk = rules["IdemproxyStoreAtRisk"]["annotations"]["description"]
    assert "CONFIG SET maxmemory-policy noeviction" in at_risk
    assert "appendonly yes" in at_risk


def metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bidemproxy_[a-z_]+\b", expr))


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
    assert "SUCCESS: 7 rules found" in result.stdout


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
    ):
        assert title in exprs, title
    assert "sum by (upstream, kind)" in exprs["Duplicates blocked by upstream and kind"][0]
    assert "sum by (agent, kind)" in exprs["Duplicates blocked by agent"][0]
    assert "idemproxy_agent_paused" in exprs["Paused agents"][0]
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


def test_notes_tell_how_to_reach_the_admin_api_and_warn_about_sqlite() -> None:
    notes = render().notes
    assert f"port-forward deploy/{RELEASE}-idemproxy 9090:9090" in notes
    assert "emptyDir" in notes
    assert "emptyDir" not in render(PRODUCTION).notes
