"""The README's snippet that adds the sidecar to a Deployment of another chart."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from .tooling import (
    CHART_DIR,
    RELEASE,
    container,
    lint,
    lint_problems,
    pod_spec,
    render,
    restricted_violations,
    validate_object,
)
from .values import (
    readme_block,
)


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
