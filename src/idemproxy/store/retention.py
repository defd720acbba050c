"""How long every store keeps what is not an effect record: one set of figures for all backends.

A record lives its route's ``ttl_s`` (at most ``MAX_RECORD_TTL_S``); what explains or protects a
record must outlive it, so those figures are cut from that maximum.
"""

from __future__ import annotations

MAX_RECORD_TTL_S = 90 * 86_400  # the longest a route's ttl_s may be (config enforces it)

# Outbox events: the recovery controller reads them within hours; a week covers a long outage.
EVENT_RETENTION_S = 7 * 86_400
# The audit log and batch archives explain a record for as long as it can live.
AUDIT_RETENTION_S = MAX_RECORD_TTL_S
ARCHIVE_RETENTION_S = MAX_RECORD_TTL_S
# An agent's pause and failure streak are read with its audit log.
CONTROL_RETENTION_S = AUDIT_RETENTION_S
# A fence counter outlives the longest-lived record twice over: an attempt that could still write
# under an old fence is long gone by then.
FENCE_RETENTION_MS = 2 * MAX_RECORD_TTL_S * 1000
