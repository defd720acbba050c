"""The shape of the tree: every module of ``src/idemproxy`` has its test module at the mirror of
its path (``a/b.py`` is tested in ``tests/a/test_b.py``), and fits in 300 lines.

The modules that do not yet are listed below. The lists may only shrink: a listed module that
gains its test file, or comes back under the limit, fails until its name is taken off, so what
was won cannot be lost again. To print both lists as they stand (to rewrite them after moving
modules): ``PYTHONPATH=src:. python -m tests.test_layout``.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "src" / "idemproxy"
TESTS = REPO / "tests"
MAX_MODULE_LINES = 300

# Modules without their mirrored test module, by path under src/idemproxy.
UNTESTED = frozenset(
    {
        "admin/auth.py",
        "admin/client.py",
        "admin/sender.py",
        "cli/agent_views.py",
        "cli/compensation.py",
        "cli/duplicates.py",
        "cli/operator.py",
        "cli/policies.py",
        "cli/serve.py",
        "effects/conflicts.py",
        "effects/context.py",
        "effects/reconciled.py",
        "errors.py",
        "instrumented.py",
        "jsonpointer.py",
        "ledger/documents.py",
        "ledger/losses.py",
        "ledger/progress.py",
        "policies/adapters/bluesky_writes.py",
        "policies/adapters/tid.py",
        "policies/append.py",
        "policies/compensation.py",
        "policies/document.py",
        "policies/kinds.py",
        "policies/match.py",
        "policies/policy.py",
        "policies/route.py",
        "policies/scope.py",
        "proxy/endpoints.py",
        "proxy/forward.py",
        "proxy/headers.py",
        "proxy/malformed.py",
        "proxy/state.py",
        "proxy/upstreams.py",
        "server.py",
        "store/control.py",
        "store/errors.py",
        "store/journal.py",
        "store/memory/control.py",
        "store/memory/journal.py",
        "store/memory/records.py",
        "store/memory/safety.py",
        "store/memory/store.py",
        "store/protocols.py",
        "store/safety.py",
        "store/sqlite/records.py",
        "store/sqlite/rows.py",
        "store/work.py",
        "workers.py",
    }
)

# Modules over MAX_MODULE_LINES lines, by path under src/idemproxy.
OVERSIZED: frozenset[str] = frozenset()


def modules() -> list[Path]:
    """Every module of the package, ``__init__.py`` aside (a package is tested by its modules)."""
    return sorted(path for path in SOURCE.rglob("*.py") if path.name != "__init__.py")


def name(module: Path) -> str:
    return module.relative_to(SOURCE).as_posix()


def mirror(module: Path) -> Path:
    """Where the test module of ``module`` lives."""
    relative = module.relative_to(SOURCE)
    return TESTS / relative.parent / f"test_{relative.name}"


def line_count(module: Path) -> int:
    return len(module.read_text(encoding="utf-8").splitlines())


def untested() -> set[str]:
    return {name(module) for module in modules() if not mirror(module).is_file()}


def oversized() -> set[str]:
    return {name(module) for module in modules() if line_count(module) > MAX_MODULE_LINES}


def present() -> set[str]:
    return {name(module) for module in modules()}


def test_every_module_has_its_test_module() -> None:
    missing = sorted(untested() - UNTESTED)
    assert not missing, "write the test module of each, at the mirror of its path: " + ", ".join(
        str(mirror(SOURCE / module).relative_to(REPO)) for module in missing
    )


def test_the_untested_list_only_names_modules_still_without_tests() -> None:
    stale = sorted(UNTESTED - (untested() & present()))
    assert not stale, "take these off UNTESTED (tested now, or gone): " + ", ".join(stale)


def test_every_module_fits_in_the_line_limit() -> None:
    over = sorted(oversized() - OVERSIZED)
    assert not over, f"split these by concern, {MAX_MODULE_LINES} lines at most: " + ", ".join(
        f"{module} ({line_count(SOURCE / module)})" for module in over
    )


def test_the_oversized_list_only_names_modules_still_over_the_limit() -> None:
    stale = sorted(OVERSIZED - (oversized() & present()))
    assert not stale, "take these off OVERSIZED (within the limit now, or gone): " + ", ".join(
        stale
    )


def _frozenset_literal(label: str, names: set[str]) -> str:
    if not names:  # ``{}`` would be a dict
        return f"{label}: frozenset[str] = frozenset()\n"
    entries = "".join(f'        "{entry}",\n' for entry in sorted(names))
    return f"{label} = frozenset(\n    {{\n{entries}    }}\n)\n"


if __name__ == "__main__":
    print(_frozenset_literal("UNTESTED", untested()))
    print(_frozenset_literal("OVERSIZED", oversized()))
