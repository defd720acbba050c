"""Configuration: defaults < config file < ``IDEMPROXY_*`` environment < command-line flags.

Every problem is reported as one :class:`ConfigError` paragraph naming where the bad value came
from (file, variable or flag), the field and the fix.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from idemproxy.config.messages import describe
from idemproxy.config.settings import ENV_PREFIX, ProxyConfig, UpstreamConfig
from idemproxy.errors import ConfigError
from idemproxy.policies.loader import load_policy
from idemproxy.policies.policy import Policy

ENV_NESTING = "__"
# Kubernetes injects these for any Service named "idemproxy" in the namespace; they are not
# settings, and refusing them as unknown would stop the sidecar from starting.
_SERVICE_LINK = re.compile(
    r"IDEMPROXY_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)"
)


# The operator commands' own variable (cli/verbs.py), no setting of the proxy's: a shell that
# exported it for them runs serve too.
CLI_VARIABLES = frozenset({f"{ENV_PREFIX}ADMIN_URL"})


class LoadedConfig:
    """A validated config with each upstream's policy loaded."""

    def __init__(self, config: ProxyConfig, policies: dict[str, Policy]) -> None:
        self.config = config
        self.policies = policies


def _set_path(target: dict[str, Any], path: list[str], value: object) -> None:
    for part in path[:-1]:
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            child = target[part] = {}
        target = child
    target[path[-1]] = value


def _merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> None:
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _env_layer(environ: Mapping[str, str], sources: dict[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name in CLI_VARIABLES:
            continue
        if _SERVICE_LINK.fullmatch(name):
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split(ENV_NESTING)]
        _set_path(layer, path, value)
        sources[".".join(path)] = f"environment variable {name}"
    return layer


def _file_layer(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {path}: {exc.strerror}; check the path"
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if document is None:
        # A mount of the wrong ConfigMap key, a file truncated: never "OK" with all defaults.
        raise ConfigError(
            f"config file {path} has no settings (it is empty or all comments): write them in"
            " it, e.g. upstreams: {discord: {url: 'https://discord.com/api'}} (see"
            " docs/configuration.md), or name no config file"
        )
    if not isinstance(document, dict):
        raise ConfigError(f"config file {path} must be a YAML mapping of settings")
    return document


def load_settings(
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> ProxyConfig:
    """The merged, validated settings alone, without the upstreams' policies: what a command
    working on the proxy's store needs of its config (``--store`` with ``--config``)."""
    sources: dict[str, str] = {}
    merged: dict[str, Any] = {}
    if path is not None:
        file_layer = _file_layer(path)
        _merge(merged, file_layer)
        sources.update({key: f"config file {path}" for key in file_layer})
    _merge(merged, _env_layer(os.environ if environ is None else environ, sources))
    for dotted, value in (flags or {}).items():
        _set_path(merged, dotted.split("."), value)
        sources[dotted] = f"flag --{dotted.split('.')[0].replace('_', '-')}"
    try:
        config = ProxyConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(describe(exc, sources, ProxyConfig)) from exc
    return config


def load_config(
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> LoadedConfig:
    """Merge the layers, validate them and load every upstream's policy."""
    config = load_settings(path, environ, flags)
    if not config.admin_listen.is_loopback and config.admin_token is None:
        raise ConfigError(
            f"admin_listen {config.admin_listen} is reachable from outside this host, so the"
            f" admin API needs a bearer token: set {ENV_PREFIX}ADMIN_TOKEN (or admin_token),"
            " or bind admin_listen to 127.0.0.1"
        )
    if config.workers > 1 and config.store.startswith("memory:"):
        raise ConfigError(
            f"workers is {config.workers} but the store is memory://, which lives inside one"
            " process: each worker would keep its own records and a duplicate reaching another"
            " worker would be sent again. Use workers: 1, or a sqlite:/// or redis:// store"
        )
    policies: dict[str, Policy] = {}
    for name in config.upstreams:
        try:
            policy = load_policy(config.policy_ref(name))
            policies[name] = policy.with_approvals(config.upstreams[name].approvals)
        except ValueError as exc:
            raise ConfigError(f"upstream {name!r}: {exc}") from exc
        except ConfigError as exc:
            raise ConfigError(f"upstream {name!r}: {exc}") from exc
        _check_ttls(name, config.upstreams[name], policies[name])
    _check_retention(config, policies)
    return LoadedConfig(config, policies)


def _check_retention(config: ProxyConfig, policies: dict[str, Policy]) -> None:
    """Refuse an archive or audit log kept shorter than the records it explains: a batch
    whose records still live would have lost its archive, or the audit entry of a decision."""
    routes = [
        (name, route)
        for name, policy in policies.items()
        for route in (*policy.routes, policy.default)
    ]
    if not routes:
        return
    upstream, longest = max(routes, key=lambda item: item[1].ttl_s)
    retention = config.retention
    for setting, kept_s in (("archive_s", retention.archive_s), ("audit_s", retention.audit_s)):
        if kept_s < longest.ttl_s:
            variable = f"{ENV_PREFIX}RETENTION__{setting.upper()}"
            raise ConfigError(
                f"retention.{setting} {kept_s} is shorter than the ttl_s {longest.ttl_s} of route"
                f" {longest.name!r} of upstream {upstream!r}: what explains a record must outlive"
                f" it. Set retention.{setting} (or {variable}) to at least {longest.ttl_s}, or"
                " lower the route's ttl_s"
            )


def _check_ttls(name: str, upstream: UpstreamConfig, policy: Policy) -> None:
    """Refuse a route whose records could expire before the upstream's slowest answer.

    An SDK that gave up waiting repeats the call about a read timeout after the first attempt;
    a record already gone by then lets the repeat through as a new effect.
    """
    for route in (*policy.routes, policy.default):
        if route.ttl_s < upstream.read_timeout_s:
            raise ConfigError(
                f"upstream {name!r}: route {route.name!r} has ttl_s {route.ttl_s}, shorter than"
                f" the upstream's read_timeout_s {upstream.read_timeout_s:g}: a repeat after a"
                f" timed-out answer would find no record. Raise the route's ttl_s to at least"
                f" {math.ceil(upstream.read_timeout_s)} or lower read_timeout_s"
            )
