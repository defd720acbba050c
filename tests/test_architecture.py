"""The import rules of docs/architecture.md, held by the code itself.

Each module of ``src/idemproxy`` belongs to one layer; it may import its own layer and the layers
below, never one above. And no two modules import each other, directly or round a circle, even
for type checking only: a circle is two modules that cannot be read apart.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Lowest first, as docs/architecture.md draws them. A module is in the layer with the longest
# prefix naming it or a package above it: ``idemproxy.proxy.forward`` is in "bytes", below the
# effects it carries, while ``idemproxy.proxy.handler`` is in "serving", above them.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "idemproxy",
            "idemproxy.agent",
            "idemproxy.errors",
            "idemproxy.encodings",
            "idemproxy.jsonpointer",
            "idemproxy.multipart",
            "idemproxy.fingerprint",
            "idemproxy.eventloop",
            "idemproxy.logs",
            "idemproxy.duplicates",
            "idemproxy.metrics",
            "idemproxy.metricchildren",
            "idemproxy.jsonrpc",
        ),
    ),
    ("integrations", ("idemproxy.integrations",)),
    ("store", ("idemproxy.store",)),
    (
        "policy",
        (
            "idemproxy.policies",
            "idemproxy.config",
            "idemproxy.credentials",
            "idemproxy.effectkeys",
            "idemproxy.mcpcalls",
            "idemproxy.scopes",
            "idemproxy.recorded",
            "idemproxy.storerisks",
            "idemproxy.storeguard",
            "idemproxy.instrumented",
        ),
    ),
    (
        "bytes",
        (
            "idemproxy.proxy.forward",
            "idemproxy.proxy.relay",
            "idemproxy.proxy.headers",
            "idemproxy.proxy.problems",
            "idemproxy.proxy.upstreams",
            "idemproxy.proxy.body",
            "idemproxy.proxy.endpoints",
            "idemproxy.proxy.retry",
            "idemproxy.proxy.malformed",
        ),
    ),
    ("effects", ("idemproxy.effects",)),
    ("serving", ("idemproxy.proxy", "idemproxy.ledger")),
    ("admin", ("idemproxy.admin",)),
    ("process", ("idemproxy.server", "idemproxy.workers")),
    ("cli", ("idemproxy.cli",)),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted((SRC / "idemproxy").rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The project modules ``name`` imports, anywhere in it (functions, TYPE_CHECKING too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from package import module`` imports the module; ``from module import name``
            # the module.
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            if target in known and target != name:
                yield target


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    edges = {name: set(imported(name, path, known)) for name, path in found.items()}
    # A package's __init__ is imported on the way to any of its modules; count only real uses.
    return {
        name: {t for t in targets if not _is_package_of(t, name)} for name, targets in edges.items()
    }


def _is_package_of(package: str, name: str) -> bool:
    return (
        name.startswith(package + ".")
        and (SRC / package.replace(".", "/") / "__init__.py").exists()
    )


def layer_of(name: str) -> int:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            # The root package names only its __init__: a new module must be placed.
            below = prefix != "idemproxy" and name.startswith(prefix + ".")
            if (name == prefix or below) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    if best is None:
        raise AssertionError(f"{name} is in no layer: add it to LAYERS and docs/architecture.md")
    return best[1]


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Every import of a module in a higher layer than the importer's."""
    return [
        f"{name} ({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for name, targets in sorted(edges.items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(name)
    ]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_round_a_circle() -> None:
    assert circles(graph()) == []


def test_every_module_imports_only_its_layer_and_below() -> None:
    assert upward(graph()) == []


def test_every_module_has_a_layer() -> None:
    for name in modules():
        layer_of(name)


def test_the_rules_see_a_breach() -> None:
    """Each check can fail: an import of the CLI from the store, and a pair importing each other."""
    edges = graph()
    edges["idemproxy.store.records"].add("idemproxy.cli.serve")
    assert upward(edges) == ["idemproxy.store.records (store) imports idemproxy.cli.serve (cli)"]
    edges["idemproxy.errors"].add("idemproxy.encodings")
    edges["idemproxy.encodings"].add("idemproxy.errors")
    assert ["idemproxy.encodings", "idemproxy.errors"] in circles(edges)
