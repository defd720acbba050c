"""A composed store hands every call of each protocol to that protocol's part, as it came."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from idemproxy.store.approvals import Approvals
from idemproxy.store.composed import ComposedStore
from idemproxy.store.memory import MemoryStore
from idemproxy.store.protocols import Control, Journal, RecordStore, Safety
from idemproxy.store.redis.store import RedisStore
from idemproxy.store.sqlite import SQLiteStore

PROTOCOLS = {
    "records": RecordStore,
    "journal": Journal,
    "control": Control,
    "safety": Safety,
    "approvals": Approvals,
}


def members(protocol: type) -> list[str]:
    """The methods a protocol declares itself (not those of ``Protocol`` or ``object``)."""
    return [
        name
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and not name.startswith("_")
    ]


class Part:
    """Notes every call it gets and answers it with a token of its own."""

    backend = "part"

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, method: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((method, args, kwargs))
            if method == "expect_marker":  # the one call that is not awaited
                return None

            async def answered() -> Any:
                return (self.name, method)

            return answered()

        return call


@pytest.mark.parametrize(
    ("part", "method"),
    [(part, method) for part, protocol in PROTOCOLS.items() for method in members(protocol)],
)
async def test_each_call_reaches_its_protocols_part_with_its_arguments(
    part: str, method: str
) -> None:
    parts = {name: Part(name) for name in PROTOCOLS}
    records, journal, control, safety, approvals = parts.values()
    store = ComposedStore(records, journal, control, safety, approvals=approvals)
    arguments = tuple(f"arg-{index}" for index in range(_arity(getattr(ComposedStore, method))))
    answer = getattr(store, method)(*arguments)
    if inspect.isawaitable(answer):
        answer = await answer
    assert {name: part.calls for name, part in parts.items() if part.calls} == {
        part: [(method, arguments, {})]
    }
    returns = inspect.signature(getattr(ComposedStore, method)).return_annotation
    if returns not in ("None", None):
        assert answer == (part, method)


def test_the_composed_store_is_as_wide_as_the_five_protocols() -> None:
    declared = {method for protocol in PROTOCOLS.values() for method in members(protocol)}
    written = {name for name, value in vars(ComposedStore).items() if inspect.isfunction(value)}
    assert {name for name in written if not name.startswith("_")} == declared


@pytest.mark.parametrize("backend", [MemoryStore, SQLiteStore, RedisStore])
def test_every_backend_is_a_composed_store(backend: type) -> None:
    """One shape for all: no backend writes the store's delegations out again."""
    assert issubclass(backend, ComposedStore)
    overridden = {name for name in vars(backend) if name in vars(ComposedStore)}
    assert {name for name in overridden if not name.startswith("_")} == set()


def _arity(method: Any) -> int:
    parameters = list(inspect.signature(method).parameters.values())[1:]  # self
    return len(parameters)
