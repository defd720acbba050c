"""charts/idemproxy, rendered and linted offline with helm-python-sdk (Helm v4 as a library):
lint in strict mode, every rendered object valid for the Kubernetes 1.29 API (kubernetes-validate,
strict: unknown fields fail), the values schema's messages, and the install notes."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
import yaml

from .tooling import (
    CHART_DIR,
    RELEASE,
    REPO_ROOT,
    lint,
    lint_problems,
    render,
    render_error,
    validate_object,
)
from .values import (
    ALL_OFF,
    ALL_ON,
    PRODUCTION,
    VALUE_SETS,
)


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
        ({"sidecar": {"console": "public"}}, "'/sidecar/console'"),
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


def test_notes_tell_how_to_reach_the_admin_api_and_warn_about_sqlite() -> None:
    notes = render().notes
    assert f"port-forward deploy/{RELEASE}-idemproxy 9090:9090" in notes
    assert "emptyDir" in notes
    assert "emptyDir" not in render(PRODUCTION).notes
