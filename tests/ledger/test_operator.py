"""Both sides of the operator's seam offer every call of it, with the same parameters."""

from __future__ import annotations

import inspect

import pytest

from idemproxy.admin.client import AdminClient
from idemproxy.ledger.operator import Operator
from idemproxy.ledger.service import LedgerService

CALLS = sorted(
    name
    for name, member in vars(Operator).items()
    if not name.startswith("_") and inspect.iscoroutinefunction(member)
)


def parameters(side: type, name: str) -> list[tuple[str, object]]:
    found = inspect.signature(getattr(side, name)).parameters.values()
    return [(parameter.name, parameter.default) for parameter in found]


def test_the_seam_has_the_calls_the_cli_makes() -> None:
    assert {"status", "batches", "recover", "rollback", "agent", "resolve"} <= set(CALLS)


@pytest.mark.parametrize("side", [LedgerService, AdminClient])
@pytest.mark.parametrize("name", CALLS)
def test_each_side_offers_the_call_with_the_seams_parameters(side: type, name: str) -> None:
    assert inspect.iscoroutinefunction(getattr(side, name, None)), f"{side.__name__}.{name}"
    assert parameters(side, name) == parameters(Operator, name)
