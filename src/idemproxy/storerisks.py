"""How a store's durability (store/safety.py) is judged against ``store_safety`` settings.

Each risk is a finding with a message that names the fix. Eviction blocks by default: it drops
records silently while everything looks healthy, and ``allow_eviction`` is the explicit way to
accept that. A store that keeps nothing on disk blocks only where the deployment says it needs
persistence (``require_persistence``): the dev Redis and ``memory://`` keep nothing, and
refusing them by default would refuse every laptop and test run. A setting that cannot be read
counts as unsafe for whichever of the two it leaves open.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from idemproxy.config.settings import StoreSafetyConfig
from idemproxy.store.safety import Durability

NO_EVICTION = "noeviction"


class Risk(StrEnum):
    """What could make the store lose records (a label of ``idemproxy_store_risk``)."""

    EVICTION = "eviction"
    NO_PERSISTENCE = "no_persistence"
    UNVERIFIED = "unverified"  # a setting that would say could not be read


@dataclass(frozen=True, slots=True)
class Finding:
    risk: Risk
    blocks: bool  # effects are refused while it stands
    message: str


def findings(durability: Durability, settings: StoreSafetyConfig, backend: str) -> list[Finding]:
    """Every risk of ``durability``, with whether the settings let effects go ahead anyway."""
    found = []
    eviction = _eviction(durability, settings)
    if eviction is not None:
        found.append(eviction)
    persistence = _persistence(durability, settings, backend)
    if persistence is not None:
        found.append(persistence)
    return found


def _eviction(durability: Durability, settings: StoreSafetyConfig) -> Finding | None:
    policy = durability.eviction_policy
    if policy == NO_EVICTION:
        return None
    blocks = not settings.allow_eviction
    if blocks:
        accept = "; or accept the risk with store_safety.allow_eviction: true"
    else:
        accept = " (store_safety.allow_eviction is true: effects are served all the same)"
    if policy is None:
        return Finding(
            Risk.UNVERIFIED,
            blocks,
            "cannot tell whether the store evicts records: its maxmemory-policy cannot be read"
            f" ({durability.persistence}). Fix: allow the proxy's Redis user CONFIG GET or"
            f" INFO{accept} once you know the policy is noeviction",
        )
    return Finding(
        Risk.EVICTION,
        blocks,
        f"the store may evict records to make room (Redis maxmemory-policy {policy}), and a"
        " repeat of an evicted effect would be sent again. Fix: CONFIG SET maxmemory-policy"
        " noeviction, and set it where the server is configured (redis.conf, or the managed"
        f" service's parameter group) so that a restart keeps it{accept}",
    )


def _persistence(
    durability: Durability, settings: StoreSafetyConfig, backend: str
) -> Finding | None:
    if durability.persistent:
        return None
    blocks = settings.require_persistence
    if blocks:
        required = " (store_safety.require_persistence is true: effects are refused until then)"
    else:
        required = "; set store_safety.require_persistence: true to refuse effects until it does"
    if backend == "memory":
        fix = "use a sqlite:/// or redis:// store"
    else:
        fix = (
            "CONFIG SET appendonly yes and CONFIG SET appendfsync always, and the same where"
            " the server is configured"
        )
    if durability.persistent is None:
        return Finding(
            Risk.UNVERIFIED,
            blocks,
            "cannot tell whether the store keeps records across a restart"
            f" ({durability.persistence}). Fix: allow the proxy's Redis user CONFIG GET or"
            f" INFO, and make sure it runs with appendonly yes{required}",
        )
    return Finding(
        Risk.NO_PERSISTENCE,
        blocks,
        f"the store does not keep its records across a restart ({durability.persistence}),"
        f" and repeats of the effects it loses would be sent again. Fix: {fix}{required}",
    )
