"""``idemproxy serve`` and ``idemproxy check-config``."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path
from typing import Any

from idemproxy import eventloop
from idemproxy.config.loader import LoadedConfig, load_config
from idemproxy.errors import ConfigError
from idemproxy.logs import configure_logging
from idemproxy.policies.base_url import misplaced_base_urls
from idemproxy.policies.catalog import effect_counts


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values or ():
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise ConfigError(f"{flag} {value!r} must look like NAME=VALUE, e.g. {flag} up=...")
        pairs[name] = rest
    return pairs


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for name in ("store", "listen", "admin_listen", "agent_id", "log_level", "workers"):
        value = getattr(args, name, None)
        if value is not None:
            flags[name] = value
    for name, url in _pairs(args.upstream, "--upstream").items():
        flags[f"upstreams.{name}.url"] = url
    for name, policy in _pairs(args.policy, "--policy").items():
        flags[f"upstreams.{name}.policy"] = policy
    return flags


def _load(args: argparse.Namespace) -> LoadedConfig:
    return load_config(args.config, flags=_flags(args))


def _serve(args: argparse.Namespace) -> int:
    loaded = _load(args)
    configure_logging(loaded.config.log_level)
    if loaded.config.workers > 1:
        from idemproxy.workers import run_workers

        return run_workers(loaded)
    from idemproxy.server import serve

    try:
        eventloop.run(serve(loaded))
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise ConfigError(
            f"cannot listen: {exc.strerror} ({loaded.config.listen} or"
            f" {loaded.config.admin_listen}); stop the process holding the port or choose"
            " another with --listen / --admin-listen"
        ) from exc
    return 0


def _warn_without_upstreams(loaded: LoadedConfig) -> None:
    """A config may leave upstreams to the environment, but one with none proxies nothing."""
    if not loaded.config.upstreams:
        print(
            "warning: no upstreams are configured, so every request would be answered 404"
            " unknown-upstream; add them under upstreams: (docs/configuration.md)"
        )


def _check_config(args: argparse.Namespace) -> int:
    loaded = _load(args)
    _warn_without_upstreams(loaded)
    for name, policy in loaded.policies.items():
        url = loaded.config.upstreams[name].url
        print(
            f"upstream {name}: {url} policy {policy.name} (adapter {policy.adapter};"
            f" {len(policy.routes) + 1} routes: {effect_counts(policy)})"
        )
    urls = {name: upstream.url for name, upstream in loaded.config.upstreams.items()}
    problems = misplaced_base_urls(urls, loaded.policies)
    for problem in problems:
        print(f"idemproxy: warning: {problem.message()}", file=sys.stderr)
    # A warning leaves the exit code 0: the config works, only some routes never match.
    noted = f", with {len(problems)} warning{'s' * (len(problems) > 1)}" if problems else ""
    print(f"{args.config or 'configuration'}: OK{noted}")
    return 0


def _add_config_flags(parser: argparse.ArgumentParser, *, config_positional: bool) -> None:
    if config_positional:
        parser.add_argument("config", type=Path, help="config file to validate")
    else:
        parser.add_argument("--config", type=Path, help="YAML config file")
    parser.add_argument(
        "--upstream", action="append", metavar="NAME=URL", help="add an upstream (repeatable)"
    )
    parser.add_argument(
        "--policy",
        action="append",
        metavar="NAME=PACK_OR_FILE",
        help="policy of an upstream: a shipped pack name or a YAML file (repeatable)",
    )
    parser.add_argument("--store", help="redis://..., sqlite:///path.db or memory://")
    parser.add_argument("--listen", help="proxy HOST:PORT (default 127.0.0.1:8080)")
    parser.add_argument("--admin-listen", dest="admin_listen", help="admin HOST:PORT")
    parser.add_argument("--agent-id", dest="agent_id", help="agent id when requests name none")
    parser.add_argument(
        "--log-level", dest="log_level", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument(
        "--workers", type=int, metavar="N", help="proxy processes sharing the listener (default 1)"
    )


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = verbs.add_parser("serve", help="run the proxy")
    _add_config_flags(serve, config_positional=False)
    serve.set_defaults(run=_serve)
    check = verbs.add_parser("check-config", help="validate a config and its policies")
    _add_config_flags(check, config_positional=True)
    check.set_defaults(run=_check_config)
