"""The Redis store's Lua scripts: each state change is one script, so it is one round trip.

Redis runs a script atomically, so checking the state and fence, changing the record, moving it
in or out of the review zset and appending its outbox event can never be seen half done, and
no proxy can slip in between check and write. Times come from ``redis.call('TIME')`` rather than
from the caller, so that every proxy sharing the server agrees on whether a lease has run out.
Scripts are sent by EVALSHA, so the source crosses the wire once per server.

Each script is a file, ``scripts/<name>.lua`` (package data), run after ``scripts/prelude.lua``,
which holds the functions several share. A script opens by naming its KEYS and ARGV; its ARGV
is built from its tuple in :mod:`.argv`. Hash and stream fields are written
``{{record.fingerprint}}`` in the files and replaced on loading by their names in
:mod:`.keys` (``{{record.fingerprint}}`` is ``RecordField.FINGERPRINT``), so the scripts and
the decoders cannot spell a field two ways.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any, Generic, TypeVar

from idemproxy.store.redis import approval_args, argv
from idemproxy.store.redis.argv import ScriptArg
from idemproxy.store.redis.fields import FIELDS

A = TypeVar("A", bound=tuple[Any, ...])

SCRIPTS_DIR = "scripts"
PRELUDE = "prelude"
_FIELD = re.compile(r"\{\{(\w+)\.(\w+)\}\}")


class LuaScript(Generic[A]):
    """A script, by the name of its file, and the tuple its ARGV is built from."""

    def __init__(self, name: str, args: type[A]) -> None:
        self.name = name
        self.args = args

    def __repr__(self) -> str:
        return f"LuaScript({self.name!r}, {self.args.__name__})"

    @functools.cached_property
    def source(self) -> str:
        """The prelude and the script, fields named."""
        return with_fields(read(PRELUDE) + "\n" + read(self.name))

    def argv(self, args: A) -> list[ScriptArg]:
        """ARGV as the script takes it."""
        return argv.flatten(args)


def read(name: str) -> str:
    """The text of ``scripts/<name>.lua`` as shipped."""
    return (resources.files(__package__) / SCRIPTS_DIR / f"{name}.lua").read_text("utf-8")


def with_fields(text: str) -> str:
    """``text`` with every ``{{group.field}}`` replaced by the field's name.

    Raises ``ValueError`` for a group or field that :data:`~.fields.FIELDS` does not have.
    """

    def name(match: re.Match[str]) -> str:
        group, field = match.groups()
        fields = FIELDS.get(group)
        if fields is None or field.upper() not in fields.__members__:
            raise ValueError(f"no field {match.group()} in store/redis/fields.py")
        return str(fields[field.upper()].value)

    named = _FIELD.sub(name, text)
    if "{{" in named:
        start = named.index("{{")
        raise ValueError(f"not a field placeholder: {named[start : start + 40]!r}")
    return named


# The records.
CLAIM = LuaScript("claim", argv.ClaimArgs)
SETTLE = LuaScript("settle", argv.SettleArgs)
RESOLVE = LuaScript("resolve", argv.ResolveArgs)
RENEW = LuaScript("renew", argv.RenewArgs)
FETCH_UNKNOWN = LuaScript("fetch_unknown", argv.FetchUnknownArgs)
FETCH_BATCH = LuaScript("fetch_batch", argv.FetchBatchArgs)
SWEEP = LuaScript("sweep", argv.SweepArgs)
# The journal and the controls.
WRITE_CURSOR = LuaScript("write_cursor", argv.WriteCursorArgs)
CLEAR_BATCH = LuaScript("clear_batch", argv.ClearBatchArgs)
COUNT_EVENTS = LuaScript("count_events", argv.CountEventsArgs)
READ_CONTROL = LuaScript("read_control", argv.ReadControlArgs)
WRITE_PAUSE = LuaScript("write_pause", argv.WritePauseArgs)
# The approvals.
HOLD_APPROVAL = LuaScript("hold_approval", approval_args.HoldApprovalArgs)
DECIDE_APPROVAL = LuaScript("decide_approval", approval_args.DecideApprovalArgs)
TAKE_APPROVAL = LuaScript("take_approval", approval_args.TakeApprovalArgs)
EXPIRE_APPROVALS = LuaScript("expire_approvals", approval_args.ExpireApprovalsArgs)
# The agent registry and the worklists.
LIST = LuaScript("list", argv.ListArgs)
STALE = LuaScript("stale", argv.StaleArgs)
FORGET = LuaScript("forget", argv.ForgetArgs)
WORK = LuaScript("work", argv.WorkArgs)
TRIM_REGISTRY = LuaScript("trim_registry", argv.TrimRegistryArgs)
# The store's marker.
READ_MARKER = LuaScript("read_marker", argv.ReadMarkerArgs)
WRITE_MARKER = LuaScript("write_marker", argv.WriteMarkerArgs)

SCRIPTS: tuple[LuaScript[Any], ...] = (
    CLAIM,
    SETTLE,
    RESOLVE,
    RENEW,
    FETCH_UNKNOWN,
    FETCH_BATCH,
    SWEEP,
    WRITE_CURSOR,
    CLEAR_BATCH,
    COUNT_EVENTS,
    READ_CONTROL,
    WRITE_PAUSE,
    HOLD_APPROVAL,
    DECIDE_APPROVAL,
    TAKE_APPROVAL,
    EXPIRE_APPROVALS,
    LIST,
    STALE,
    FORGET,
    WORK,
    TRIM_REGISTRY,
    READ_MARKER,
    WRITE_MARKER,
)
