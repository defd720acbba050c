"""The MCP server of :mod:`tests.support.mcp_server` as a process, and the policy for it."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.support.processes import ServedProxy, UpstreamProcess, http_get

MCP_PATH = "/mcp"
# The tools of tests.support.mcp_server by what they do: read_count is the only safe one.
MCP_POLICY = """\
name: tools
mcp:
  tools:
    - name: read_count
      effect: safe
    - name: send_message
      volatile_arguments: [/sent_at]
    - name: slow_send
    - name: fail_send
    - name: refuse_send
    - name: confirm_send
  trust_read_only_hint: false
routes:
  - {name: stream, match: {methods: [GET, DELETE, HEAD, OPTIONS]}, effect: safe}
default: {name: mcp, effect: external}
"""


class McpServerProcess(UpstreamProcess):
    """``python -m tests.support.mcp_server PORT MODE``: ``session`` or ``stateless``."""

    def __init__(self, log_dir: Path, mode: str) -> None:
        super().__init__(log_dir, "tests.support.mcp_server", f"mcp-server-{mode}")
        self.mode = mode
        self.args.append(mode)

    def executions(self) -> dict[str, int]:
        """How many times each tool ran in this process."""
        status, body = http_get(f"{self.url}/_executions")
        assert status == 200, body
        counts: dict[str, int] = orjson.loads(body)
        return counts

    def sent(self) -> dict[str, list[int]]:
        """Each text sent, with the number of each execution that sent it."""
        status, body = http_get(f"{self.url}/_sent", timeout_s=30)
        assert status == 200, body
        sent: dict[str, list[int]] = orjson.loads(body)
        return sent

    def deleted(self) -> list[int]:
        """The ids delete_message deleted, in order."""
        status, body = http_get(f"{self.url}/_deleted")
        assert status == 200, body
        ids: list[int] = orjson.loads(body)
        return ids

    def count(self, tool: str) -> int:
        return self.executions().get(tool, 0)


def write_policy(path: Path) -> Path:
    path.write_text(MCP_POLICY)
    return path


def mcp_proxy(
    log_dir: Path, upstream_url: str, store: str, agent: str, policy: str = ""
) -> ServedProxy:
    """`idemproxy serve` with the one MCP upstream ``tools`` under ``policy`` (a file or a
    shipped pack's name; :data:`MCP_POLICY` if none); the client's URL is
    ``{proxy.url}/tools/mcp``."""
    policy = policy or str(write_policy(log_dir / "tools-policy.yaml"))
    return ServedProxy(
        log_dir,
        "--upstream", f"tools={upstream_url}",
        "--policy", f"tools={policy}",
        "--store", store,
        "--agent-id", agent,
    )  # fmt: skip


def client_url(proxy: ServedProxy) -> str:
    return f"{proxy.url}/tools{MCP_PATH}"
