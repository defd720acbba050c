"""Appends through a real ``idemproxy serve``: an upstream that trims what it stores does not
get a re-sent append twice once the route ignores surrounding whitespace, and every answer
says how many bytes of the text were not sent (``Idem-Append-Skipped-Bytes``)."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.e2e.test_audit_everything import MEMORY_POLICY
from tests.support.fakes.memory import MEMORY, MemoryService, build_memory_app
from tests.support.fakes.serving import BackgroundServers
from tests.support.processes import ServedProxy, running

pytestmark = pytest.mark.e2e

ENTRY = "- Ada prefers tea\n"


@pytest.fixture
def memory() -> Iterator[tuple[str, MemoryService]]:
    servers = BackgroundServers()
    servers.start()
    try:
        app = build_memory_app()
        yield servers.serve(app), app[MEMORY]
    finally:
        servers.stop()


def append(proxy: ServedProxy, text: str, tool_call: str) -> dict[str, str]:
    headers = {"Idem-Batch": "b1", "Idem-Tool-Call": tool_call, "Content-Type": "application/json"}
    request = urllib.request.Request(
        f"{proxy.url}/mem/v1/blocks/notes/append",
        orjson.dumps({"text": text}),
        headers,
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
        return dict(answer.headers)


def serve(tmp_path: Path, url: str, policy: str) -> ServedProxy:
    path = tmp_path / "memory.yaml"
    path.write_text(policy)
    return ServedProxy(
        tmp_path,
        "--upstream", f"mem={url}",
        "--policy", f"mem={path}",
        "--store", f"sqlite:///{tmp_path}/effects.db",
    )  # fmt: skip


@pytest.mark.parametrize("ignore", [True, False], ids=["ignoring-whitespace", "default"])
def test_a_rerun_append_to_an_upstream_that_trimmed_it(
    tmp_path: Path, memory: tuple[str, MemoryService], ignore: bool
) -> None:
    url, service = memory
    policy = MEMORY_POLICY
    if ignore:
        option = "content: /text, ignore_surrounding_whitespace: true}"
        policy = policy.replace("content: /text}", option)
    service.blocks["notes"] = "- met Ada\n" + ENTRY.strip()  # the first append, stored trimmed
    proxy = serve(tmp_path, url, policy)
    with running(proxy):
        rerun = append(proxy, ENTRY, "note-rerun")  # a new tool-call id: no key can tell
        fresh = append(proxy, "- call Bob\n", "note-2")

    if ignore:
        assert (rerun["Idem-Append"], rerun["Idem-Outcome"]) == ("present", "reconciled")
        assert rerun["Idem-Append-Skipped-Bytes"] == str(len(ENTRY.encode()))
        assert service.appends() == ["- call Bob\n"]
    else:
        # Whitespace is text by default: the newline the upstream trimmed is taken for the
        # rest of an append cut off, and only it is sent.
        assert rerun["Idem-Append"] == "remainder"
        assert rerun["Idem-Append-Skipped-Bytes"] == str(len(ENTRY.strip().encode()))
        assert service.appends() == ["\n", "- call Bob\n"]
    assert (fresh["Idem-Append"], fresh["Idem-Append-Skipped-Bytes"]) == ("appended", "0")
