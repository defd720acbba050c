"""The arguments of each Lua script (``scripts/*.lua``): one typed tuple per script.

A script opens by naming its arguments, one local each, in ARGV's order::

    local effect_id = ARGV[1]
    local lease_ms = tonumber(ARGV[3])
    local effect_ids = argv_from(4)  -- the rest, of any length

Its tuple has one field per name, in the same order. A field that is a tuple of its own
(:class:`AuditArgs`, :class:`ResponseArgs`, ...) stands for its fields, each named with the
field's name before it (``audit`` gives ``audit_retention_ms``, ``audit_action``, ...); a last
field typed ``tuple[X, ...]`` is the rest. ``tests/store/redis/test_lua.py`` holds every script
and its tuple in step. :func:`flatten` gives ARGV as sent: a bool as '1' or '0', None as ''.
"""

from __future__ import annotations

import functools
import typing
from typing import Any, NamedTuple

ScriptArg = str | int | bytes


class ResponseArgs(NamedTuple):
    """A stored response; with ``present`` false the record holds none and the rest is unused."""

    present: bool
    status: int
    headers: bytes  # store/headers.py's encoding
    body: bytes
    truncated: bool


NO_RESPONSE = ResponseArgs(False, 0, b"", b"", False)


class AuditArgs(NamedTuple):
    """An audit entry (store/journal.py's AuditEntry) and how long its stream is kept."""

    retention_ms: int
    action: str
    actor: str
    target: str
    before: str
    after: str
    note: str


NO_AUDIT = AuditArgs(0, "", "", "", "", "", "")


class StreakArgs(NamedTuple):
    """What a settle needs to count the agent's failures (store/control.py)."""

    pause_after: int  # failures in a row that pause the agent; 0: do not count
    failed: bool
    error: str
    agent: str
    control_retention_ms: int
    audit_retention_ms: int
    longest: int  # the longest streak kept


class ClaimArgs(NamedTuple):
    effect_id: str
    fingerprint: str
    lease_ms: int
    ttl_ms: int
    batch: str
    tool_call: str
    action: str
    upstream: str
    method: str
    path: str
    retention_ms: int  # the outbox's
    lapse_reason: str  # written when an expired lease is found
    ignore_pause: bool
    reworded_may_reclaim: bool  # take a freed key under another fingerprint
    epoch: str  # the marker's, as the proxy last saw it; '' to not compare
    batches_kept: int  # the most batches the agent's listing index keeps
    batches_retention_ms: int  # how long the index outlives the agent's last claim


class SettleArgs(NamedTuple):
    effect_id: str
    fence: int
    state: str
    event_type: str
    ttl_ms: int
    retention_ms: int
    external_id: str
    reason: str
    response: ResponseArgs
    streak: StreakArgs
    archive_retention_ms: int  # of the batch's archive of outcomes


class ResolveArgs(NamedTuple):
    effect_id: str
    expected_state: str
    state: str
    ttl_ms: int
    retention_ms: int
    external_id: str
    reason: str
    response: ResponseArgs
    has_audit: bool
    audit: AuditArgs
    expected_fence: int | None  # None: any
    archive_retention_ms: int  # of the batch's archive of outcomes


class RenewArgs(NamedTuple):
    fence: int
    lease_ms: int
    effect_id: str


class FetchUnknownArgs(NamedTuple):
    effect_ids: tuple[bytes, ...]


class FetchBatchArgs(NamedTuple):
    effect_ids: tuple[bytes, ...]


class SweepArgs(NamedTuple):
    retention_ms: int
    lapse_reason: str
    effect_ids: tuple[bytes, ...]


class WriteCursorArgs(NamedTuple):
    version: int  # as read: the compare-and-set's
    retention_ms: int
    has_audit: bool
    audit: AuditArgs
    fields: tuple[ScriptArg, ...]  # name, value pairs


class ClearBatchArgs(NamedTuple):
    has_archive: bool
    archive: bytes
    archive_retention_ms: int
    audit: AuditArgs
    event_retention_ms: int
    event_batch: str
    event_reason: str  # of batch.abandoned, sent when there is an archive
    id_fence_pairs: tuple[ScriptArg, ...]


class CountEventsArgs(NamedTuple):
    start: str  # '-' or '(<event id>'
    cap: int


class ReadControlArgs(NamedTuple):
    """read_control takes no arguments."""


class WritePauseArgs(NamedTuple):
    version: int  # as read: the compare-and-set's
    set_pause: bool  # false clears it
    origin: str
    reason: str
    actor: str
    reset_failures: bool
    control_retention_ms: int
    audit: AuditArgs
    event_retention_ms: int
    event_reason: str  # of agent.paused or agent.resumed


class ListArgs(NamedTuple):
    agents: tuple[str, ...]


class StaleArgs(NamedTuple):
    grace_ms: int
    limit: int  # of each worklist


class ForgetArgs(NamedTuple):
    before: int  # as stale returned it
    entries: tuple[ScriptArg, ...]  # agent, worklist (1 or 2), has work, for each


class WorkArgs(NamedTuple):
    """work takes no arguments."""


class TrimRegistryArgs(NamedTuple):
    seen_before_ms: int
    cap: int


class ReadMarkerArgs(NamedTuple):
    """read_marker takes no arguments."""


class MarkerArgs(NamedTuple):
    epoch: str
    created_ms: int
    checks: int
    replaces: str  # epochs, space-separated


NO_MARKER = MarkerArgs("", 0, 0, "")


class LossArgs(NamedTuple):
    id: str
    detected_ms: int
    kind: str
    epochs: str  # space-separated
    detail: str


NO_LOSS = LossArgs("", 0, "", "", "")


class LogEntryArgs(NamedTuple):
    """An entry of the store's own log."""

    action: str
    actor: str
    target: str
    before: str
    after: str
    note: str


NO_LOG_ENTRY = LogEntryArgs("", "", "", "", "", "")


class WriteMarkerArgs(NamedTuple):
    read_epoch: str  # the marker's epoch and checks as read, '' for none
    read_checks: str
    read_loss_id: str  # '' for none
    write_marker: bool
    marker: MarkerArgs
    loss_action: str  # '1' writes the loss, '2' deletes it, '0' neither
    loss: LossArgs
    write_log: bool
    log: LogEntryArgs
    log_limit: int


def flatten(args: tuple[Any, ...]) -> list[ScriptArg]:
    """ARGV from a script's tuple: nested tuples in line, the rest at the end."""
    return _plan(type(args))(args)


class _Plan:
    """How to flatten one tuple class, worked out once from its type hints.

    It runs on every claim and settle, so a call copies the tuple and mends only the fields
    that are not sent as they are: flags, optional values, nested tuples and the rest.
    """

    def __init__(self, cls: type[tuple[Any, ...]]) -> None:
        hints = typing.get_type_hints(cls)
        # Position, and what stands there: a flag, an optional value, the rest, or a tuple's plan.
        self._mends: list[tuple[int, str | _Plan]] = []
        for position, name in enumerate(cls._fields):  # type: ignore[attr-defined]
            hint = hints[name]
            if hint is bool:
                self._mends.append((position, _FLAG))
            elif isinstance(hint, type) and issubclass(hint, tuple):
                self._mends.append((position, _plan(hint)))
            elif typing.get_origin(hint) is tuple:
                self._mends.append((position, _REST))
            elif type(None) in typing.get_args(hint):
                self._mends.append((position, _OPTIONAL))
        self._mends.reverse()  # spliced from the end, so that earlier positions hold

    def __call__(self, args: tuple[Any, ...]) -> list[ScriptArg]:
        argv: list[Any] = list(args)
        for position, mend in self._mends:
            value = argv[position]
            if mend is _FLAG:
                argv[position] = "1" if value else "0"
            elif mend is _OPTIONAL:
                argv[position] = "" if value is None else value
            elif mend is _REST:
                argv[position : position + 1] = value
            else:
                assert isinstance(mend, _Plan)
                argv[position : position + 1] = mend(value)
        return argv


_FLAG, _OPTIONAL, _REST = "flag", "optional", "rest"


@functools.cache
def _plan(cls: type[tuple[Any, ...]]) -> _Plan:
    return _Plan(cls)
