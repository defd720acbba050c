"""How long every store keeps what is not an effect record: one set of figures for all backends.

A record lives its route's ``ttl_s`` (at most ``MAX_RECORD_TTL_S``); what explains or protects a
record must outlive it, so the defaults are cut from that maximum. A proxy's ``retention:``
settings (config/settings.py) give a :class:`Retention` of their own, which the store factory
hands to the backend it opens; every part of a backend reads its figures from that one object.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_RECORD_TTL_S = 90 * 86_400  # the longest a route's ttl_s may be (config enforces it)

# Outbox events: the recovery controller reads them within hours; a week covers a long outage.
EVENT_RETENTION_S = 7 * 86_400
# The audit log and batch archives explain a record for as long as it can live.
AUDIT_RETENTION_S = MAX_RECORD_TTL_S
ARCHIVE_RETENTION_S = MAX_RECORD_TTL_S
# An agent's pause and failure streak are read with its audit log.
CONTROL_RETENTION_S = AUDIT_RETENTION_S
# A fence counter outlives the longest-lived record twice over: an attempt that could still write
# under an old fence is long gone by then. Not configurable: a shorter one could hand out a
# fence again while a record it numbered still lives.
FENCE_RETENTION_MS = 2 * MAX_RECORD_TTL_S * 1000


@dataclass(frozen=True, slots=True)
class Retention:
    """How long a store keeps events, audit entries and archives, in seconds.

    ``archive_s`` covers both archives of a batch: the one an abandon writes and the outcomes
    each record leaves when it settles (store/outcomes.py), so that a batch still answers once
    its records expired. An agent's pause and failure streak are kept as long as its audit log.
    """

    events_s: int = EVENT_RETENTION_S
    audit_s: int = AUDIT_RETENTION_S
    archive_s: int = ARCHIVE_RETENTION_S

    @property
    def events_ms(self) -> int:
        return self.events_s * 1000

    @property
    def audit_ms(self) -> int:
        return self.audit_s * 1000

    @property
    def archive_ms(self) -> int:
        return self.archive_s * 1000

    @property
    def control_s(self) -> int:
        return self.audit_s

    @property
    def control_ms(self) -> int:
        return self.control_s * 1000


DEFAULT_RETENTION = Retention()
