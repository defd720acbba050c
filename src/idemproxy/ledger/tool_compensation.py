"""Compensations of MCP tool calls: the call of another tool, declared by the tool's rule in
the policy's ``mcp:`` section (policies/mcp.py ``ToolCompensation``), its arguments filled from
the recorded answer of the call it undoes.

A tool call's record names its tool in its path (``/mcp#send_message``, effects/flow.py): the
record keeps the answer and no request, and the path is what says which tool ran.
"""

from __future__ import annotations

import orjson

from idemproxy.encodings import UndecodableBody
from idemproxy.policies.mcp import ToolCompensation
from idemproxy.policies.placeholders import Values, fill_value
from idemproxy.recorded import readable_body
from idemproxy.store.records import EffectRecord

# The JSON-RPC id of every compensation call: one call per request, so the answer is the
# answer to this id.
COMPENSATION_ID = "idemproxy-compensation"
TOOLS_CALL_HEADERS = (
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
)
MAX_ANSWER_BYTES = 8 * 1024 * 1024


def called_tool(path: str) -> tuple[str, str] | None:
    """The MCP endpoint and the tool a record's path names; None for an HTTP effect's path."""
    endpoint, hash_sign, tool = path.rpartition("#")
    return (endpoint, tool) if hash_sign and tool else None


def tool_call_body(record: EffectRecord, compensation: ToolCompensation) -> bytes:
    """The ``tools/call`` that undoes ``record``; ``MissingValue`` when its answer lacks a value
    the arguments are filled from."""
    if record.response is None:
        values = Values({}, response=b"")
    else:
        try:
            values = Values({}, response=readable_body(record.response, MAX_ANSWER_BYTES))
        except UndecodableBody as exc:
            values = Values({}, response_unreadable=str(exc))
    arguments = fill_value(compensation.arguments or {}, values)
    params = {"name": compensation.tool, "arguments": arguments}
    message = {"jsonrpc": "2.0", "id": COMPENSATION_ID, "method": "tools/call", "params": params}
    return orjson.dumps(message)
