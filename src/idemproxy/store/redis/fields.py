"""The names of the fields inside the Redis store's hashes and streams, one StrEnum per key
(store/redis/keys.py names the keys), and what the Lua scripts call each set of them."""

from __future__ import annotations

from enum import StrEnum


class RecordField(StrEnum):
    """Hash fields of an effect record. Short names because every record carries all of them."""

    STATE = "state"
    FENCE = "fence"
    FINGERPRINT = "fp"
    BATCH = "batch"
    TOOL_CALL = "tool_call"
    ACTION = "action"
    UPSTREAM = "upstream"
    METHOD = "method"
    PATH = "path"
    LEASE_EXPIRES_MS = "lease_exp"
    CREATED_MS = "created"
    UPDATED_MS = "updated"
    ATTEMPTS = "attempts"
    STATUS = "status"  # present only when the record holds a response
    HEADERS = "headers"  # store/headers.py's list of [name, value] pairs
    BODY = "body"
    TRUNCATED = "trunc"
    EXTERNAL_ID = "ext"
    REASON = "reason"
    # The batch index set's key name: settle is not told the batch, yet extends that set's
    # expiry, and a batch's fetch tells its records from those claimed again under another.
    BATCH_KEY = "bkey"


class EventField(StrEnum):
    """Fields of an outbox stream entry: the record as it stood, and what happened to it."""

    TYPE = "type"
    EFFECT_ID = "effect_id"
    BATCH = "batch"
    TOOL_CALL = "tool_call"
    ACTION = "action"
    UPSTREAM = "upstream"
    METHOD = "method"
    PATH = "path"
    STATUS = "status"
    EXTERNAL_ID = "ext"
    REASON = "reason"
    TS_MS = "ts"
    STATE = "state"
    EXTRA = "extra"  # an orjson object of strings, where the event carries one (an approval's)


class ApprovalField(StrEnum):
    """Hash fields of an approval (store/approvals.py); the agent is its key's."""

    ID = "id"
    EFFECT_ID = "effect_id"
    FINGERPRINT = "fp"
    BATCH = "batch"
    TOOL_CALL = "tool_call"
    ACTION = "action"
    UPSTREAM = "upstream"
    METHOD = "method"
    PATH = "path"
    STATE = "state"
    RULE = "rule"
    SUMMARY = "summary"
    REQUESTED_MS = "requested"
    DECIDED_MS = "decided"
    VALID_UNTIL_MS = "valid_until"
    ACTOR = "actor"
    NOTE = "note"
    KEEP_MS = "keep"
    VALID_MS = "valid"
    REQUESTS = "requests"


class AuditField(StrEnum):
    """Fields of an audit stream entry, and of an entry of the store's own log."""

    ACTION = "action"
    ACTOR = "actor"
    TARGET = "target"
    BEFORE = "before"
    AFTER = "after"
    NOTE = "note"


class ControlField(StrEnum):
    """Hash fields of an agent's control: its pause, and the compare-and-set version."""

    PAUSED = "paused"  # the pause's origin, empty when running
    REASON = "reason"
    ACTOR = "actor"
    SINCE = "since"
    VERSION = "v"


class CursorField(StrEnum):
    """Hash fields of an agent's delivery cursor."""

    ACKED = "acked"
    OWNER = "owner"
    LEASE_EXPIRES_MS = "lease"
    ATTEMPTS = "attempts"
    RETRY_AT_MS = "retry_at"
    LAST_ERROR = "error"
    PARKED_MS = "parked"
    VERSION = "v"


class MarkerField(StrEnum):
    """Hash fields of the store's marker."""

    EPOCH = "epoch"
    CREATED_MS = "created"
    CHECKS = "checks"
    REPLACES = "replaces"


class LossField(StrEnum):
    """Hash fields of a loss of records found and not yet acknowledged."""

    ID = "id"
    DETECTED_MS = "detected"
    KIND = "kind"
    EPOCHS = "epochs"
    DETAIL = "detail"


class OutcomesKey(StrEnum):
    """What the scripts add to a batch set's name to name the batch's archive of outcomes (an
    encoded batch holds no ``:``, so no batch set can be named so)."""

    SUFFIX = ":outcomes"


# What the Lua scripts call each set of fields: ``{{record.fingerprint}}`` in a script's text
# is RecordField.FINGERPRINT's name on the wire (store/redis/lua.py).
FIELDS: dict[str, type[StrEnum]] = {
    "record": RecordField,
    "event": EventField,
    "approval": ApprovalField,
    "audit": AuditField,
    "control": ControlField,
    "cursor": CursorField,
    "marker": MarkerField,
    "loss": LossField,
    "outcomes": OutcomesKey,
}
