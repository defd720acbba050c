"""Compensations of single effects: the request that undoes one (from its route's template),
the key it is recorded under, and sending it through the proxy.

A compensation's key derives from the effect it undoes (same agent and batch, tool call
``compensate:<tool call>``, a step digested from the effect key), so it is recorded like any
effect, reported to the controller, and a second run replays it instead of undoing twice. It
carries ``Idem-Compensates``: an operator's effect passes the agent's pause, once the sender has
sealed it as the proxy's own (effects/seal.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol
from urllib.parse import urlencode

import orjson

from idemproxy.effectkeys import KeyHeaders, resolve_effect_key
from idemproxy.encodings import UndecodableBody
from idemproxy.ledger.compensated import compensated_by
from idemproxy.ledger.tool_compensation import (
    TOOLS_CALL_HEADERS,
    answer_failed,
    called_tool,
    tool_call_body,
)
from idemproxy.policies.compensation import Compensation
from idemproxy.policies.matcher import RouteMatcher
from idemproxy.policies.placeholders import (
    MissingValue,
    Values,
    fill_text,
    fill_value,
    path_params,
)
from idemproxy.policies.policy import Policy
from idemproxy.policies.route import Route
from idemproxy.recorded import readable_body
from idemproxy.scopes import scope_of, scoped
from idemproxy.store.records import EffectRecord, RecordKey, RecordState

TOOL_CALL_PREFIX = "compensate:"
MAX_ID_CHARS = 255
_ANY_ROUTE = Route(name="compensation")


class UndoState(StrEnum):
    PLANNED = "planned"  # will be sent
    UNDONE = "undone"  # its compensation completed (in this run or an earlier one)
    FAILED = "failed"  # its compensation failed: the run stopped here
    CANNOT = "cannot"  # no compensation can be sent for it
    INVALID = "invalid"  # the route's template does not fit the record: fix the policy


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One compensation as the proxy gets it."""

    upstream: str
    method: str
    path: str  # below the upstream, encoded
    body: bytes
    headers: tuple[tuple[str, str], ...]  # Idem-* and Content-Type
    # A tools/call of an MCP server: the sender opens a session for it where the server keeps
    # them, and reads its answer for a tool's error.
    mcp: bool = False


@dataclass(frozen=True, slots=True)
class Sent:
    """The proxy's answer to one compensation."""

    status: int
    outcome: str  # Idem-Outcome
    detail: str = ""
    # The answer reports a failure its status does not: an MCP tool's error.
    answer_failed: bool = False


class Sender(Protocol):
    async def send(self, outgoing: Outgoing, credentials: Mapping[str, str]) -> Sent:
        """Send through the proxy; ``credentials`` are the operator's headers for the upstream."""
        ...


@dataclass(frozen=True, slots=True)
class Undo:
    """One completed effect of the batch, and what compensating it is or was."""

    effect_key: str
    tool_call: str
    action: str
    upstream: str
    external_id: str
    state: UndoState
    request: str = ""  # "POST /v1/refunds", filled in
    compensation_key: str = ""
    status: int = 0
    detail: str = ""


def compensation_headers(record: EffectRecord) -> KeyHeaders:
    """The key headers of the compensation of ``record``: stable, so a repeat replays."""
    tool_call = TOOL_CALL_PREFIX + record.meta.tool_call
    if len(tool_call) > MAX_ID_CHARS:
        tool_call = TOOL_CALL_PREFIX + hashlib.sha256(record.meta.tool_call.encode()).hexdigest()
    step = hashlib.sha256(str(record.key).encode()).hexdigest()[:32]
    return KeyHeaders(
        agent=record.key.agent,
        batch=record.meta.batch,
        tool_call=tool_call,
        step=step,
        action=f"compensate_{record.meta.action}"[:MAX_ID_CHARS],
    )


def compensation_key(record: EffectRecord) -> RecordKey:
    """Where the compensation of ``record`` is recorded: the key the proxy derives from its
    headers (an explicit step, so the route and the request do not enter it), in the scope of
    ``record``, which the operator's credentials for its upstream name again."""
    key = resolve_effect_key(compensation_headers(record), _ANY_ROUTE, record.key.agent, "")
    key = scoped(key, scope_of(record.key))
    assert key is not None  # a batch and a tool call always make a key
    return key.record_key


def is_compensation(record: EffectRecord) -> bool:
    return record.meta.tool_call.startswith(TOOL_CALL_PREFIX)


@dataclass(frozen=True, slots=True)
class Item:
    """A planned compensation with what sending it takes (None: nothing to send)."""

    undo: Undo
    outgoing: Outgoing | None = None


class Compensator:
    """Plans and runs compensations with the proxy's policies and a :class:`Sender`."""

    def __init__(self, policies: Mapping[str, Policy], sender: Sender) -> None:
        self._matchers = {name: RouteMatcher(policy) for name, policy in policies.items()}
        self._mcp = {name: policy.mcp for name, policy in policies.items() if policy.mcp}
        self._sender = sender

    def plan_item(self, record: EffectRecord, done: EffectRecord | None) -> Item:
        """What compensating ``record`` takes; ``done`` is its compensation's record, if any."""
        undo = Undo(
            effect_key=str(record.key),
            tool_call=record.meta.tool_call,
            action=record.meta.action,
            upstream=record.meta.upstream,
            external_id=record.external_id,
            state=UndoState.PLANNED,
        )
        if record.state is RecordState.UNKNOWN:
            return Item(_cannot(undo, "its outcome is unknown: resolve it in review first"))
        undone_by = compensated_by(record)
        if undone_by:  # its recorded answer is now the refusal: nothing to fill a template from
            return Item(replace(undo, state=UndoState.UNDONE, compensation_key=undone_by))
        planned = self._outgoing(record)
        if isinstance(planned, Cannot):
            state = UndoState.INVALID if planned.invalid else UndoState.CANNOT
            return Item(replace(undo, state=state, detail=planned.why))
        outgoing, request = planned
        undo = replace(
            undo,
            request=request,
            compensation_key=str(compensation_key(record)),
        )
        if done is not None and done.state is RecordState.COMPLETED and _ok(done):
            return Item(replace(undo, state=UndoState.UNDONE, status=_status(done)))
        return Item(undo, outgoing)

    def _outgoing(self, record: EffectRecord) -> tuple[Outgoing, str] | Cannot:
        """The request that undoes ``record``, and how a plan shows it."""
        matcher = self._matchers.get(record.meta.upstream)
        if matcher is None:
            return Cannot(f"upstream {record.meta.upstream!r} is not configured")
        rules = self._mcp.get(record.meta.upstream)
        called = called_tool(record.meta.path) if rules is not None else None
        if rules is not None and called is not None:
            endpoint, tool = called
            rule = rules.tool(tool)
            if rule is None or rule.compensation is None:
                return Cannot(f"tool {tool!r} declares no compensation")
            try:
                body = tool_call_body(record, rule.compensation)
            except MissingValue as exc:
                return Cannot(_unfillable(f"tool {tool!r}", exc), invalid=True)
            headers = (*_idem_headers(record), *TOOLS_CALL_HEADERS)
            outgoing = Outgoing(record.meta.upstream, "POST", endpoint, body, headers, mcp=True)
            return outgoing, rule.compensation.describe()
        route = matcher.match(record.meta.method, record.meta.path)
        if route.compensation is None:
            return Cannot(f"route {route.name!r} declares no compensation")
        try:
            outgoing = _outgoing(record, route, route.compensation)
        except MissingValue as exc:
            return Cannot(_unfillable(f"route {route.name!r}", exc), invalid=True)
        return outgoing, f"{outgoing.method} {outgoing.path}"

    async def run(
        self, items: list[Item], credentials: Mapping[str, Mapping[str, str]]
    ) -> list[Undo]:
        """Send the planned items in order; stop at the first failure."""
        results: list[Undo] = []
        stopped = False
        for item in items:
            if stopped or item.outgoing is None:
                results.append(item.undo)
                continue
            sent = await self._sender.send(
                item.outgoing, credentials.get(item.outgoing.upstream, {})
            )
            if 0 < sent.status < 400 and not sent.answer_failed:
                results.append(replace(item.undo, state=UndoState.UNDONE, status=sent.status))
                continue
            stopped = True
            detail = f"{sent.outcome}: {sent.detail}" if sent.detail else sent.outcome
            results.append(
                replace(item.undo, state=UndoState.FAILED, status=sent.status, detail=detail)
            )
        return results


@dataclass(frozen=True, slots=True)
class Cannot:
    """Why no compensation can be sent for an effect; ``invalid``: the policy's template does
    not fit it."""

    why: str
    invalid: bool = False


def _cannot(undo: Undo, why: str) -> Undo:
    return replace(undo, state=UndoState.CANNOT, detail=why)


def _unfillable(what: str, exc: MissingValue) -> str:
    return (
        f"{what}: its compensation cannot be filled from this effect ({exc}); fix the policy's"
        " compensation, or undo this effect by hand"
    )


def _status(record: EffectRecord) -> int:
    return record.status


def _ok(record: EffectRecord) -> bool:
    return _status(record) < 400 and not answer_failed(record)


def _values(record: EffectRecord, route: Route) -> Values:
    """What the compensation is filled from: the path, and the answer decoded as the agent's
    client decoded it (the record keeps it gzipped if that is how it came)."""
    params = path_params(route.match.path, record.meta.path)
    if record.response is None:
        return Values(params, response=b"")
    try:
        return Values(params, response=readable_body(record.response, route.max_recorded_bytes))
    except UndecodableBody as exc:
        return Values(params, response_unreadable=str(exc))


def _outgoing(record: EffectRecord, route: Route, compensation: Compensation) -> Outgoing:
    values = _values(record, route)
    path = fill_text(compensation.path, values, in_path=True)
    content: list[tuple[str, str]] = []
    data = b""
    if compensation.json_body is not None:
        data = orjson.dumps(fill_value(compensation.json_body, values))
        content = [("Content-Type", "application/json")]
    elif compensation.form is not None:
        form = compensation.form.items()
        data = urlencode([(name, fill_text(v, values, in_path=False)) for name, v in form]).encode()
        content = [("Content-Type", "application/x-www-form-urlencoded")]
    headers = (*_idem_headers(record), *content)
    return Outgoing(record.meta.upstream, compensation.method, path, data, headers)


def _idem_headers(record: EffectRecord) -> tuple[tuple[str, str], ...]:
    headers = compensation_headers(record)
    return (
        ("Idem-Agent", record.key.agent),
        ("Idem-Batch", headers.batch or ""),
        ("Idem-Tool-Call", headers.tool_call or ""),
        ("Idem-Step", headers.step or ""),
        ("Idem-Action", headers.action or ""),
        ("Idem-Compensates", str(record.key)),
    )
