"""The layers of the request path: proxy's byte moving, then effects, then proxy's app on top.

``effects`` sends through ``proxy``'s mechanics (forward, relay, headers, problems, upstreams)
and is run by ``proxy``'s app, handler and state, so the two import each other only that way
round, and neither needs an import hidden behind ``TYPE_CHECKING`` to do it.
"""

from __future__ import annotations

import ast
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "src" / "idemproxy"
PROXY_ON_TOP = frozenset({"app", "handler", "state"})


def imported(path: Path) -> set[str]:
    """The ``idemproxy`` modules (and names of them) a module imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.startswith("idemproxy.")}


def modules(package: str) -> dict[str, Path]:
    return {path.stem: path for path in (SOURCE / package).glob("*.py")}


def test_effects_imports_only_the_byte_moving_part_of_proxy() -> None:
    for name, path in modules("effects").items():
        above = {f"idemproxy.proxy.{top}" for top in PROXY_ON_TOP} & imported(path)
        assert not above, f"effects/{name}.py imports {above}"


def test_of_proxy_only_the_app_handler_and_state_import_effects() -> None:
    for name, path in modules("proxy").items():
        if name in PROXY_ON_TOP:
            continue
        effects = {module for module in imported(path) if module.startswith("idemproxy.effects")}
        assert not effects, f"proxy/{name}.py imports {effects}"


def test_no_import_is_hidden_behind_type_checking() -> None:
    for package in ("effects", "proxy"):
        for name, path in modules(package).items():
            assert "TYPE_CHECKING" not in path.read_text(), f"{package}/{name}.py"
