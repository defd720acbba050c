"""The chart's value sets the deploy tests render (ours and the README's), and helpers over
what they render."""

from __future__ import annotations

import copy
import re
from typing import Any

from .tooling import (
    CHART_DIR,
    Manifest,
    Rendered,
    pod_spec,
    render,
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


def readme_block(first_line: str) -> str:
    """The fenced yaml block of the chart README that starts with ``first_line``."""
    readme = (CHART_DIR / "README.md").read_text()
    for block in re.findall(r"```yaml\n(.*?)```", readme, flags=re.DOTALL):
        if block.startswith(first_line):
            return str(block)
    raise AssertionError(f"README.md has no yaml block starting with {first_line!r}")


def metric_names(expr: str) -> set[str]:
    """The idemproxy metrics a PromQL expression reads."""
    return set(re.findall(r"\bidemproxy_[a-z_]+\b", expr))
