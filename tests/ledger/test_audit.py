"""The limit on operators' recovery actions counts operators' actions, not the proxy's own."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from idemproxy.effects.audit import AutoAction, automatic
from idemproxy.errors import ProblemCode, RequestRefused
from idemproxy.ledger.audit import ActionLimit, AuditAction
from idemproxy.store.journal import AuditEntry
from idemproxy.store.protocols import Store

REPO = Path(__file__).resolve().parents[2]


async def test_the_proxys_own_entries_do_not_use_up_an_operators_minute(
    store: Store, ns: str
) -> None:
    limit = ActionLimit(store, per_minute=2)
    for index in range(5):
        entry = automatic(ns, AutoAction.CONFLICT_REFUSED, f"{ns}/k{index}", "completed", "x")
        await store.append_audit(entry)

    await limit.check(ns)  # five refusals the proxy audited are no operator's actions

    for _ in range(2):
        await store.append_audit(AuditEntry(ns, AuditAction.PAUSE, "ops@host", ns))
    with pytest.raises(RequestRefused) as raised:
        await limit.check(ns)
    assert raised.value.code is ProblemCode.RATE_LIMITED


def test_the_admin_api_describes_every_action_the_log_may_hold() -> None:
    spec = yaml.safe_load((REPO / "docs" / "admin-api.openapi.yaml").read_text(encoding="utf-8"))
    listed = set(spec["components"]["schemas"]["AuditEntry"]["properties"]["action"]["enum"])
    assert {*AuditAction, *AutoAction} <= listed
