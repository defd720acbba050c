"""The README's agent snippets, taken from README.md as they stand and run against a real
`idemproxy serve` in front of a fake Discord, so they cannot drift from what works."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import REPO, FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

SECTION = "## Pointing an agent at it"
README_PROXY = "http://127.0.0.1:8080"


def agent_section() -> str:
    readme = (REPO / "README.md").read_text()
    start = readme.index(SECTION)
    end = readme.index("\n## ", start + len(SECTION))
    return readme[start:end]


def snippets() -> list[str]:
    return [str(block) for block in re.findall(r"```python\n(.*?)```", agent_section(), re.DOTALL)]


def agent_install_command() -> list[str]:
    """The packages the README tells a user to install in the agent's environment."""
    commands = re.findall(r"`pip install ([^`]+)` in the agent's environment", agent_section())
    assert len(commands) == 1, "the README must say what to install where the agent runs"
    return str(commands[0]).split()


def imported_modules(source: str) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.partition(".")[0])
    return modules


def test_the_install_command_covers_every_import_of_the_snippets() -> None:
    installed = set(agent_install_command())
    found = snippets()
    assert len(found) == 2
    for snippet in found:
        third_party = imported_modules(snippet) - set(sys.stdlib_module_names)
        assert third_party <= installed, f"{third_party - installed} is imported, not installed"


def run_snippet(snippet: str, proxy_url: str) -> str:
    """Run it as a user would paste it, with the proxy's address in place of the default."""
    assert README_PROXY in snippet
    result = subprocess.run(
        [sys.executable, "-c", snippet.replace(README_PROXY, proxy_url)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_each_snippet_posts_once_and_its_repeat_is_replayed(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    proxy = ServedProxy(
        tmp_path,
        "--upstream", f"discord={upstream.url}/api",
        "--policy", "discord=discord",
        "--store", f"sqlite:///{tmp_path}/store.db",
    )  # fmt: skip
    with running(proxy):
        for number, snippet in enumerate(snippets(), start=1):
            assert run_snippet(snippet, proxy.url) == "forwarded"
            assert run_snippet(snippet, proxy.url) == "replayed"
            assert len(upstream.effects("/api/v10/channels/123/messages")) == number

    # The helper's snippet carried its tool call to the proxy, which keyed the effect by it
    # (Discord's nonce is derived from the key): the two posts were two effects, not one.
    nonces = {effect["body"] for effect in upstream.effects("/messages")}
    assert len(nonces) == 2
