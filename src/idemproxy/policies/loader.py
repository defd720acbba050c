"""Load policies by shipped pack name or from a YAML file, with errors a user can act on.

Every problem names the file, the line (from the YAML node it is about), the field and the fix,
as one :class:`~idemproxy.errors.ConfigError` paragraph.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from idemproxy.errors import ConfigError
from idemproxy.policies.document import LocatedError
from idemproxy.policies.policy import Policy

_PACKS = resources.files("idemproxy.policies") / "packs"

Loc = tuple[str | int, ...]


def shipped_packs() -> list[str]:
    """Names of the policy packs that ship with idemproxy."""
    names = (entry.name for entry in _PACKS.iterdir())
    return sorted(name.removesuffix(".yaml") for name in names if name.endswith(".yaml"))


def pack_text(name: str) -> str:
    """The YAML source of a shipped pack."""
    return (_PACKS / f"{name}.yaml").read_text(encoding="utf-8")


def load_policy(name_or_path: str) -> Policy:
    """A shipped pack by name (``discord``) or a policy file by path (``./my-api.yaml``)."""
    if name_or_path in shipped_packs():
        return parse_policy(pack_text(name_or_path), f"shipped pack {name_or_path!r}")
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigError(
            f"policy {name_or_path!r} is neither a shipped pack ({', '.join(shipped_packs())})"
            " nor a readable file; give a pack name or the path to a policy YAML file"
        )
    return parse_policy(path.read_text(encoding="utf-8"), str(path))


def parse_policy(text: str, source: str) -> Policy:
    """Validate a policy document; ``source`` names it in error messages."""
    document, root = _compose(text, source)
    if not isinstance(document, dict):
        raise ConfigError(
            f"{source}, line 1: a policy is a YAML mapping with 'name', 'routes' and 'default'"
        )
    try:
        return Policy.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(source, exc, root)) from exc


def _compose(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        document = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}, line {mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or exc
        raise ConfigError(f"{where}: not valid YAML ({problem}); fix the syntax and retry") from exc
    finally:
        loader.dispose()
    return document, root


def node_line(root: yaml.Node | None, loc: Loc, *, key: bool = False) -> int | None:
    """The 1-based line of the node at ``loc``, or of the deepest part of it that exists.

    With ``key`` the line of the last mapping key itself (for an unknown key, the key is the
    problem, not its value).
    """
    node = root
    line = None if node is None else node.start_mark.line + 1
    for depth, part in enumerate(loc):
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    last = depth == len(loc) - 1
                    child = key_node if key and last else value_node
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            child = node.value[part] if 0 <= part < len(node.value) else None
        if child is None:
            break
        node, line = child, child.start_mark.line + 1
    return line


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key; remove it or check its spelling against docs/policies.md"
    if kind == "missing":
        return "required; add it"
    message = error["msg"].removeprefix("Value error, ")
    if kind == "enum":
        return f"{error['input']!r} is not allowed. {message}"
    return message


def _location(error: ErrorDetails) -> Loc:
    located = (error.get("ctx") or {}).get("error")
    loc: Loc = tuple(error["loc"])
    if isinstance(located, LocatedError):
        loc += located.loc
    return loc


def describe_validation_error(source: str, exc: ValidationError, root: yaml.Node | None) -> str:
    """One paragraph naming each bad field by its line and path, what is wrong and the fix."""
    problems = []
    for error in exc.errors():
        loc = _location(error)
        line = node_line(root, loc, key=error["type"] == "extra_forbidden")
        where = ".".join(str(part) for part in loc) or "(document)"
        at = f"{source}, line {line}" if line is not None else source
        problems.append(f"{at}: {where}: {_message(error)}")
    return "; ".join(problems)
