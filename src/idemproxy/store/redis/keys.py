"""Every Redis key the store writes, in one place.

All keys of one agent carry the hash tag ``{<agent>}``, so every Lua script touches a single
slot and the same layout works on Redis Cluster::

    idem:{A}:r:<effect_id>   hash    one effect record (state, fence, lease, response, ...)
    idem:{A}:outbox          stream  the agent's events; the stream id is the event id
    idem:{A}:unknown         zset    effect ids awaiting review, scored by updated ms
    idem:{A}:b:<batch>       set     effect ids claimed under one batch
    idem:{A}:b:<batch>:outcomes  hash  effect id -> its outcome, kept past the record
                                     (store/outcomes.py); named from the set, as settle is
                                     told no batch
    idem:{A}:batches         zset    the agent's batch ids, scored by when each started (ms)
    idem:{A}:leases          zset    effect ids in flight, scored by lease expiry ms (the sweep)
    idem:{A}:cursor          hash    where delivery to the recovery controller stands
    idem:{A}:audit           stream  operator actions (resolutions, recoveries, retries)
    idem:{A}:archive:<batch> string  an abandoned batch's records as they stood
    idem:{A}:control         hash    the agent's pause (paused, reason, actor, since) and version
    idem:{A}:streak          list    "<fence> <effect_id>" of each consecutive failure
    idem:{A}:snapshot        list    the same, as an automatic pause found them (to free on resume)
    idem:{A}:fence           string  the last fencing token handed out to any of the agent's keys
    idem:{A}:ap:<approval>   hash    one approval (store/approvals.py); kept for ever while open,
                                     ``keep_ms`` once settled
    idem:{A}:approvals       zset    the open approvals' ids, scored by when each was asked for
    idem:agents              zset    every agent id, scored by when a proxy last saw it
    idem:{idem:store}:marker hash    the store's marker: epoch, created, checks, replaces
    idem:{idem:store}:loss   hash    a loss of records found and not yet acknowledged
    idem:{idem:store}:log    stream  the store's own log: marked, loss found, acknowledged
    idem:{:agents}:review    zset    the sweep's worklist (store/work.py), scored by when a
                                     proxy last listed the agent (Redis ms)
    idem:{:agents}:delivery  zset    delivery's worklist, scored the same way
    idem:{:agents}:approval  zset    the approvals' worklist, scored the same way
    idem:{:agents}:seeded    string  present once the worklists were seeded from idem:agents

These are the keys outside any agent's slot. They are written by commands and scripts of their
own, never from an agent's script, so they work on Redis Cluster too. The worklist keys share
the tag ``{:agents}`` and the store-wide keys of the marker (store/safety.py) the tag
``{idem:store}``; no agent's tag can be either (an encoded id never holds ``:``), so each of
their scripts touches one slot. The marker's keys never expire: a Redis that evicts only keys
with an expiry (``volatile-*``) never drops them.

Agent, effect and batch ids come from request headers, so each is percent-encoded with every
character outside ``A-Za-z0-9_.-~`` escaped (``{``, ``}``, ``:`` and ``%`` included). The
encoding is injective and never yields ``{``, ``}`` or ``:``, so a crafted id can neither move
a key to another slot nor collide with another agent's keys. An empty agent is written as a
lone ``%``, which no encoded string can be: an empty tag ``{}`` would make Redis Cluster hash
the whole key name and scatter the agent's keys over several slots.

Stored response headers are :mod:`idemproxy.store.headers`' orjson list of ``[name, value]``
pairs, as in the SQLite store.
"""

from __future__ import annotations

import functools
import re

from idemproxy.store.records import RecordKey
from idemproxy.store.redis.fields import OutcomesKey
from idemproxy.store.work import Work

PREFIX = "idem"


_SAFE_ID = re.compile(rb"[A-Za-z0-9_.~-]*")
_UNSAFE_BYTE = re.compile(rb"[^A-Za-z0-9_.~-]")


def encode_id(value: str) -> str:
    """Percent-encode a user-supplied id so it is safe inside a key name.

    Byte for byte what ``urllib.parse.quote(value, safe="")`` gives (keys written by either
    must match), at a fraction of its cost: it escapes only the bytes that need it instead of
    mapping every byte through a table.
    """
    raw = value.encode("utf-8")
    if _SAFE_ID.fullmatch(raw):
        return value
    return _UNSAFE_BYTE.sub(_percent, raw).decode("ascii")


def _percent(match: re.Match[bytes]) -> bytes:
    return b"%%%02X" % match.group()[0]


@functools.lru_cache(maxsize=1024)
def agent_tag(agent: str) -> str:
    """The hash tag shared by every key of ``agent``."""
    return "{" + (encode_id(agent) or "%") + "}"


def record_key(key: RecordKey) -> str:
    """The hash holding one effect record."""
    return f"{PREFIX}:{agent_tag(key.agent)}:r:{encode_id(key.effect_id)}"


def outbox_key(agent: str) -> str:
    """The stream of the agent's events."""
    return f"{PREFIX}:{agent_tag(agent)}:outbox"


def unknown_key(agent: str) -> str:
    """The review queue: effect ids in state ``unknown``, scored by updated ms."""
    return f"{PREFIX}:{agent_tag(agent)}:unknown"


def batch_key(agent: str, batch: str) -> str:
    """The set of effect ids claimed under ``batch``."""
    return f"{PREFIX}:{agent_tag(agent)}:b:{encode_id(batch)}"


def batches_key(agent: str) -> str:
    """The agent's batches, scored by when each started: the listing of store/batches.py."""
    return f"{PREFIX}:{agent_tag(agent)}:batches"


def leases_key(agent: str) -> str:
    """In-flight effect ids scored by lease expiry, so expired leases are found without a scan."""
    return f"{PREFIX}:{agent_tag(agent)}:leases"


def cursor_key(agent: str) -> str:
    """The agent's delivery cursor."""
    return f"{PREFIX}:{agent_tag(agent)}:cursor"


def audit_key(agent: str) -> str:
    """The stream of the agent's audit entries."""
    return f"{PREFIX}:{agent_tag(agent)}:audit"


def outcomes_key(agent: str, batch: str) -> str:
    """The batch's archive of outcomes: the batch set's name and its suffix."""
    return batch_key(agent, batch) + OutcomesKey.SUFFIX


def archive_key(agent: str, batch: str) -> str:
    """The archive of an abandoned batch."""
    return f"{PREFIX}:{agent_tag(agent)}:archive:{encode_id(batch)}"


def control_key(agent: str) -> str:
    """The agent's pause and its compare-and-set version."""
    return f"{PREFIX}:{agent_tag(agent)}:control"


def streak_key(agent: str) -> str:
    """The agent's current run of failed attempts."""
    return f"{PREFIX}:{agent_tag(agent)}:streak"


def snapshot_key(agent: str) -> str:
    """The failed attempts an automatic pause of the agent found."""
    return f"{PREFIX}:{agent_tag(agent)}:snapshot"


def fence_key(agent: str) -> str:
    """The counter every fence of the agent's records comes from."""
    return f"{PREFIX}:{agent_tag(agent)}:fence"


def approval_key(agent: str, approval_id: str) -> str:
    """The hash holding one approval."""
    return f"{PREFIX}:{agent_tag(agent)}:ap:{encode_id(approval_id)}"


def approvals_key(agent: str) -> str:
    """The agent's open approvals, scored by when each was asked for (ms)."""
    return f"{PREFIX}:{agent_tag(agent)}:approvals"


AGENTS_KEY = f"{PREFIX}:agents"
_STORE_TAG = "{idem:store}"
MARKER_KEY = f"{PREFIX}:{_STORE_TAG}:marker"
LOSS_KEY = f"{PREFIX}:{_STORE_TAG}:loss"
STORE_LOG_KEY = f"{PREFIX}:{_STORE_TAG}:log"
WORKLIST_TAG = "{:agents}"
SEEDED_KEY = f"{PREFIX}:{WORKLIST_TAG}:seeded"


def worklist_key(work: Work) -> str:
    """The agents that may have ``work``, scored by when a proxy last listed them."""
    return f"{PREFIX}:{WORKLIST_TAG}:{work.value}"


def state_keys(key: RecordKey) -> list[str]:
    """The keys a settle or resolve script changes: record, outbox, review zset, leases."""
    return [record_key(key), outbox_key(key.agent), unknown_key(key.agent), leases_key(key.agent)]


def claim_keys(key: RecordKey, batch: str) -> list[str]:
    """The keys of a claim's script, the marker aside (scripts/claim.lua)."""
    agent = key.agent
    return [
        record_key(key),
        outbox_key(agent),
        unknown_key(agent),
        batch_key(agent, batch),
        leases_key(agent),
        control_key(agent),
        fence_key(agent),
        cursor_key(agent),
        batches_key(agent),
    ]
