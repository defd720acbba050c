"""Load policies by shipped pack name or from a YAML file, with errors a user can act on."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from idemproxy.errors import ConfigError
from idemproxy.policies.model import Policy

_PACKS = resources.files("idemproxy.policies") / "packs"


def shipped_packs() -> list[str]:
    """Names of the policy packs that ship with idemproxy."""
    names = (entry.name for entry in _PACKS.iterdir())
    return sorted(name.removesuffix(".yaml") for name in names if name.endswith(".yaml"))


def load_policy(name_or_path: str) -> Policy:
    """A shipped pack by name (``discord``) or a policy file by path (``./my-api.yaml``)."""
    if name_or_path in shipped_packs():
        source = f"shipped pack {name_or_path!r}"
        text = (_PACKS / f"{name_or_path}.yaml").read_text(encoding="utf-8")
    else:
        path = Path(name_or_path)
        if not path.is_file():
            raise ConfigError(
                f"policy {name_or_path!r} is neither a shipped pack ({', '.join(shipped_packs())})"
                " nor a readable file; give a pack name or the path to a policy YAML file"
            )
        source = str(path)
        text = path.read_text(encoding="utf-8")
    return parse_policy(text, source)


def parse_policy(text: str, source: str) -> Policy:
    try:
        document: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML ({exc}); fix the syntax and retry") from exc
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: a policy is a YAML mapping with 'name', 'routes', 'default'")
    try:
        return Policy.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(source, exc)) from exc


def describe_validation_error(source: str, exc: ValidationError) -> str:
    """One paragraph naming each bad field by its path, what is wrong and the fix."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "(document)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key; remove it or check its spelling against the documentation"
        elif error["type"] == "missing":
            message = "required; add it"
        problems.append(f"{where}: {message}")
    return f"{source}: " + "; ".join(problems)
