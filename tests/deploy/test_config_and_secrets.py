"""What the chart gives the sidecar to read: upstream URLs that fit their packs, the base URL
each SDK expects, mounted policies, a checksum that rolls the pods, and the secrets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from idemproxy.config.settings import ProxyConfig
from idemproxy.policies.base_url import misplaced_base_urls
from idemproxy.policies.loader import load_policy, parse_policy

from .tooling import (
    CHART_DIR,
    RELEASE,
    Rendered,
    config_file,
    container,
    render,
)
from .values import (
    ALL_ON,
    PRODUCTION,
    SINGLE_PVC,
    agent_pod,
    checksum,
    merged,
    readme_block,
)


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
