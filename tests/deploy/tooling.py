"""Rendering, linting and validation helpers for the deployment checks.

The tools come from ``scripts/install-deploy-tools.sh``. A missing tool fails the test
that needs it with the command that installs it, instead of skipping: a skipped chart
check looks like a passing one.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "charts" / "idemproxy"
KUBE_VERSION = "1.29.0"
RELEASE = "bot"
NAMESPACE = "agents"

INSTALL_HINT = "run `scripts/install-deploy-tools.sh .venv`"
PIP_HINT = f"{INSTALL_HINT} (or `.venv/bin/pip install -e '.[deploy]'`)"

Manifest = dict[str, Any]

# SPEC 8: every metric an alert or a dashboard panel may use.
KNOWN_METRICS = frozenset(
    {
        "idemproxy_requests_total",
        "idemproxy_duplicates_blocked_total",
        "idemproxy_request_duration_seconds_bucket",
        "idemproxy_upstream_request_duration_seconds_bucket",
        "idemproxy_inflight_requests",
        "idemproxy_unknown_outcomes",
        "idemproxy_fenced_writes_total",
        "idemproxy_store_errors_total",
        "idemproxy_store_operation_duration_seconds_bucket",
        "idemproxy_controller_events_total",
        "idemproxy_controller_backlog",
        "idemproxy_build_info",
        "idemproxy_agents_paused",
        "idemproxy_agent_paused",
        "idemproxy_agents_in_error",
        "idemproxy_agent_error_seconds",
        "idemproxy_agent_failed_effects_total",
        "idemproxy_store_records_lost",
        "idemproxy_store_risk",
    }
)


def require_module(name: str, package: str) -> ModuleType:
    """Import ``name`` or fail the test with the install command."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pytest.fail(f"{package} is not installed in this virtualenv ({exc}): {PIP_HINT}")


def require_executable(name: str, hint: str) -> str:
    """Path of ``name`` in this virtualenv or on PATH, or fail the test with ``hint``."""
    beside_python = Path(sys.executable).parent / name
    if beside_python.is_file():
        return str(beside_python)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: {hint}")
    return found


def helm() -> Any:
    """The helm-python-sdk module (Helm v4 as a library, no helm binary)."""
    return require_module("helm_python", "helm-python-sdk")


@dataclass(frozen=True)
class Rendered:
    """The objects of one render, by template, plus the NOTES text."""

    objects: list[Manifest]
    notes: str

    def of_kind(self, kind: str) -> list[Manifest]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str) -> Manifest:
        found = self.of_kind(kind)
        assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
        return found[0]

    def named(self, kind: str, name: str) -> Manifest:
        for obj in self.of_kind(kind):
            if obj["metadata"]["name"] == name:
                return obj
        raise AssertionError(f"no {kind} named {name}; rendered: {self.kinds()}")

    def kinds(self) -> list[str]:
        return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in self.objects)


def parse_manifests(templates: dict[str, str]) -> Rendered:
    objects: list[Manifest] = []
    notes = ""
    for path, text in sorted(templates.items()):
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return Rendered(objects=objects, notes=notes)


def render(
    values: dict[str, Any] | None = None,
    *,
    chart_dir: Path = CHART_DIR,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> Rendered:
    """``helm template`` equivalent: render offline, as an install would."""
    sdk = helm()
    with sdk.Chart.load(str(chart_dir)) as chart:
        templates: dict[str, str] = chart.render(
            values, name=release, namespace=namespace, is_install=True
        )
    return parse_manifests(templates)


def render_error(values: dict[str, Any]) -> str:
    """The message a render with ``values`` fails with; fails the test if it renders."""
    sdk = helm()
    try:
        render(values)
    except sdk.HelmError as exc:
        return str(exc)
    raise AssertionError(f"render with {values} succeeded, expected a failure")


def lint(values: dict[str, Any] | None = None, *, chart_dir: Path = CHART_DIR) -> dict[str, Any]:
    """``helm lint --strict --kube-version`` equivalent; returns the report."""
    report: dict[str, Any] = helm().lint(
        str(chart_dir),
        values,
        strict=True,
        namespace=NAMESPACE,
        kube_version=f"v{KUBE_VERSION}",
    )
    return report


def lint_problems(report: dict[str, Any]) -> list[str]:
    """Lint findings that --strict fails on: warnings and errors (severity >= 2)."""
    problems = [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]
    return problems + [str(e) for e in report["errors"]]


# Structural schemas for the Prometheus Operator kinds: kubernetes-validate only knows the
# core API. They cover the fields the chart uses and reject any other (typos).
_DURATION = {"type": "string", "pattern": "^([0-9]+(ms|s|m|h|d|w|y))+$"}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
    "additionalProperties": False,
}
_RULE = {
    "type": "object",
    "required": ["alert", "expr"],
    "additionalProperties": False,
    "properties": {
        "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
        "expr": {"type": "string", "minLength": 1},
        "for": _DURATION,
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}
CRD_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "PodMonitor"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": "PodMonitor"},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "required": ["selector", "podMetricsEndpoints"],
                "additionalProperties": False,
                "properties": {
                    "selector": {
                        "type": "object",
                        "required": ["matchLabels"],
                        "additionalProperties": False,
                        "properties": {"matchLabels": _STRING_MAP},
                    },
                    "podMetricsEndpoints": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["port"],
                            "additionalProperties": False,
                            "properties": {
                                "port": {"type": "string"},
                                "path": {"type": "string", "pattern": "^/"},
                                "interval": _DURATION,
                                "scrapeTimeout": _DURATION,
                            },
                        },
                    },
                },
            },
        },
    },
    ("monitoring.coreos.com/v1", "PrometheusRule"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": "PrometheusRule"},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "required": ["groups"],
                "additionalProperties": False,
                "properties": {
                    "groups": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["name", "rules"],
                            "additionalProperties": False,
                            "properties": {
                                "name": {"type": "string"},
                                "interval": _DURATION,
                                "rules": {"type": "array", "minItems": 1, "items": _RULE},
                            },
                        },
                    }
                },
            },
        },
    },
}


def validate_object(obj: Manifest) -> None:
    """Validate one rendered object: Kubernetes 1.29 strict schemas for the core API,
    the structural schemas above for the Prometheus Operator kinds."""
    crd_schema = CRD_SCHEMAS.get((obj["apiVersion"], obj["kind"]))
    if crd_schema is not None:
        jsonschema = require_module("jsonschema", "jsonschema (via kubernetes-validate)")
        jsonschema.validate(obj, crd_schema)
        return
    kubernetes_validate = require_module("kubernetes_validate", "kubernetes-validate")
    kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def pod_spec(workload: Manifest) -> Manifest:
    spec: Manifest = workload["spec"]["template"]["spec"]
    return spec


def container(spec: Manifest, name: str) -> Manifest:
    for entry in spec.get("initContainers", []) + spec.get("containers", []):
        if entry["name"] == name:
            found: Manifest = entry
            return found
    raise AssertionError(f"no container {name} in the pod")


def config_file(rendered: Rendered) -> Manifest:
    """The proxy's config.yaml as the sidecar will read it."""
    configmap = rendered.named("ConfigMap", f"{RELEASE}-idemproxy-config")
    config: Manifest = yaml.safe_load(configmap["data"]["config.yaml"])
    return config


_RESTRICTED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)


def restricted_violations(spec: Manifest, containers: list[str] | None = None) -> list[str]:
    """Violations of the restricted Pod Security Standard (plus a read-only root
    filesystem, which this project requires too) in a pod spec.

    ``containers`` limits the per-container checks to those names (None: all).
    """
    problems = _pod_violations(spec)
    pod_ctx = spec.get("securityContext", {})
    for entry in spec.get("initContainers", []) + spec.get("containers", []):
        if containers is None or entry["name"] in containers:
            problems += _container_violations(entry, pod_ctx)
    return problems


def _pod_violations(spec: Manifest) -> list[str]:
    problems = [f"pod: {flag}" for flag in ("hostNetwork", "hostPID", "hostIPC") if spec.get(flag)]
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= _RESTRICTED_VOLUME_TYPES:
            problems.append(f"volume {volume['name']}: type {sorted(kinds)} not allowed")
    return problems


def _container_violations(entry: Manifest, pod_ctx: Manifest) -> list[str]:
    ctx = entry.get("securityContext", {})
    caps = ctx.get("capabilities", {})
    seccomp = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {}))
    found = {
        "privileged": bool(ctx.get("privileged")),
        "allowPrivilegeEscalation is not false": ctx.get("allowPrivilegeEscalation") is not False,
        "runAsNonRoot is not true": not (ctx.get("runAsNonRoot") or pod_ctx.get("runAsNonRoot")),
        "no numeric non-root runAsUser": ctx.get("runAsUser", pod_ctx.get("runAsUser"))
        in (0, None),
        f"seccompProfile {seccomp}": seccomp.get("type") not in ("RuntimeDefault", "Localhost"),
        "capabilities do not drop ALL": "ALL" not in caps.get("drop", []),
        f"adds capabilities {caps.get('add')}": bool(
            set(caps.get("add", [])) - {"NET_BIND_SERVICE"}
        ),
        "root filesystem is writable": ctx.get("readOnlyRootFilesystem") is not True,
    }
    where = f"container {entry['name']}"
    problems = [f"{where}: {what}" for what, broken in found.items() if broken]
    problems += [
        f"{where}: hostPort {port['hostPort']}"
        for port in entry.get("ports", [])
        if port.get("hostPort")
    ]
    return problems
