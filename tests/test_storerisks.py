"""A store's durability judged against the ``store_safety`` settings."""

from __future__ import annotations

from idemproxy.config.settings import StoreSafetyConfig
from idemproxy.store.safety import Durability
from idemproxy.storerisks import Finding, Risk, findings

DEFAULTS = StoreSafetyConfig()
ALLOWING = StoreSafetyConfig(allow_eviction=True)
REQUIRING = StoreSafetyConfig(require_persistence=True)


def redis(policy: str | None, persistent: bool | None) -> Durability:
    return Durability(policy, persistent, "appendonly no and no snapshots (save '')")


def only(found: list[Finding]) -> Finding:
    assert len(found) == 1, found
    return found[0]


def test_a_durable_store_that_never_evicts_has_no_risk() -> None:
    assert findings(redis("noeviction", True), REQUIRING, "redis") == []


def test_eviction_blocks_unless_allowed_and_names_the_fix() -> None:
    blocking = only(findings(redis("volatile-lru", True), DEFAULTS, "redis"))
    allowed = only(findings(redis("volatile-lru", True), ALLOWING, "redis"))
    assert (blocking.risk, blocking.blocks, allowed.blocks) == (Risk.EVICTION, True, False)
    assert "maxmemory-policy volatile-lru" in blocking.message
    assert "CONFIG SET maxmemory-policy noeviction" in blocking.message
    assert "store_safety.allow_eviction: true" in blocking.message
    assert "effects are served all the same" in allowed.message


def test_a_policy_that_cannot_be_read_is_not_taken_as_safe() -> None:
    unread = Durability(None, True, "neither CONFIG GET (NOPERM) nor INFO (NOPERM) is allowed")
    finding = only(findings(unread, DEFAULTS, "redis"))
    assert (finding.risk, finding.blocks) == (Risk.UNVERIFIED, True)
    assert "NOPERM" in finding.message
    assert not only(findings(unread, ALLOWING, "redis")).blocks


def test_no_persistence_is_a_warning_unless_the_deployment_requires_it() -> None:
    warned = only(findings(redis("noeviction", False), DEFAULTS, "redis"))
    required = only(findings(redis("noeviction", False), REQUIRING, "redis"))
    assert (warned.risk, warned.blocks, required.blocks) == (Risk.NO_PERSISTENCE, False, True)
    assert "CONFIG SET appendonly yes" in warned.message
    assert "save ''" in warned.message
    assert "store_safety.require_persistence: true" in warned.message


def test_persistence_that_cannot_be_read_blocks_only_where_it_is_required() -> None:
    unread = redis("noeviction", None)
    assert only(findings(unread, DEFAULTS, "redis")).risk is Risk.UNVERIFIED
    assert not only(findings(unread, DEFAULTS, "redis")).blocks
    assert only(findings(unread, REQUIRING, "redis")).blocks


def test_the_memory_store_is_told_to_use_a_durable_one() -> None:
    memory = Durability("noeviction", False, "memory:// keeps records inside this process")
    assert (
        "use a sqlite:/// or redis:// store" in only(findings(memory, DEFAULTS, "memory")).message
    )
