"""Append routes: the value's end is read back first, so an append is never doubled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.effects.append import SKIPPED_HEADER, AppendCase, decide, tail_overlap
from tests.proxy.conftest import ProxyFactory
from tests.support.fakes.memory import MEMORY, MemoryService, build_memory_app
from tests.support.fakes.service import Fault, Planned

Client = TestClient[web.Request, web.Application]

POLICY = """
name: memory
routes:
  - name: read
    match: {methods: [GET]}
    effect: safe
  - name: append_block
    match: {methods: [POST], path: "/v1/blocks/{block_id}/append"}
    append: {read: "/v1/blocks/{path.block_id}", value: /value, content: /text}
default: {name: write}
"""
NOTES = "- met Ada at the lab\n"
ENTRY = "- Ada prefers tea over coffee\n"


@pytest.fixture
async def upstream(aiohttp_server: Any) -> TestServer:
    server: TestServer = await aiohttp_server(build_memory_app())
    return server


@pytest.fixture
def memory(upstream: TestServer) -> MemoryService:
    return upstream.app[MEMORY]


@pytest.fixture
async def proxy(make_proxy: ProxyFactory, upstream: TestServer, tmp_path: Path) -> Client:
    policy = tmp_path / "memory.yaml"
    policy.write_text(POLICY)
    client, _ = await make_proxy(
        policy=str(policy), **{"upstreams.up.url": str(upstream.make_url(""))}
    )
    return client


async def append(proxy: Client, text: str, tool_call: str = "call-1") -> tuple[int, Any, Any]:
    headers = {"Idem-Batch": "batch-1", "Idem-Tool-Call": tool_call}
    async with proxy.post(
        "/up/v1/blocks/notes/append", json={"text": text}, headers=headers
    ) as answer:
        return answer.status, answer.headers, await answer.read()


async def test_without_overlap_the_append_is_sent_as_it_came(
    proxy: Client, memory: MemoryService
) -> None:
    memory.blocks["notes"] = NOTES

    status, headers, body = await append(proxy, ENTRY)

    assert status == 200
    assert (headers["Idem-Append"], headers["Idem-Outcome"]) == ("appended", "forwarded")
    assert memory.blocks["notes"] == NOTES + ENTRY
    assert memory.appends() == [ENTRY]
    assert orjson.loads(body)["value"] == NOTES + ENTRY


async def test_text_already_at_the_end_is_answered_without_sending(
    proxy: Client, memory: MemoryService
) -> None:
    memory.blocks["notes"] = NOTES + ENTRY

    # A re-run under a new tool-call id: no key can tell it is the same append.
    status, headers, body = await append(proxy, ENTRY, tool_call="call-1-rerun")

    assert status == 200
    assert (headers["Idem-Append"], headers["Idem-Outcome"]) == ("present", "reconciled")
    assert orjson.loads(body) == {"id": "notes", "value": NOTES + ENTRY}
    assert memory.appends() == []
    assert memory.blocks["notes"] == NOTES + ENTRY

    status, headers, _ = await append(proxy, ENTRY, tool_call="call-1-rerun")
    assert (status, headers["Idem-Outcome"], headers["Idem-Append"]) == (200, "replayed", "present")
    assert len(memory.seen_on("/v1/blocks/notes")) == 1  # the repeat did not even read


async def test_an_append_cut_off_midway_is_finished_with_only_the_rest(
    proxy: Client, memory: MemoryService
) -> None:
    memory.blocks["notes"] = NOTES
    memory.cut_next_after_chars = 12

    status, headers, _ = await append(proxy, ENTRY)
    assert (status, headers["Idem-Outcome"]) == (502, "upstream-disconnected")
    assert memory.blocks["notes"] == NOTES + ENTRY[:12]  # half an entry, and no answer

    status, headers, body = await append(proxy, ENTRY)

    assert status == 200
    assert (headers["Idem-Append"], headers["Idem-Outcome"]) == ("remainder", "reconciled")
    assert memory.appends() == [ENTRY, ENTRY[12:]]
    assert memory.blocks["notes"] == NOTES + ENTRY
    assert orjson.loads(body)["value"] == NOTES + ENTRY


async def test_an_unknown_append_that_did_land_is_reconciled_without_sending(
    proxy: Client, memory: MemoryService
) -> None:
    memory.blocks["notes"] = NOTES
    memory.plan("append", Planned(Fault.DROP_AFTER))

    status, _, _ = await append(proxy, ENTRY)
    assert status == 502

    status, headers, _ = await append(proxy, ENTRY)
    assert (status, headers["Idem-Append"]) == (200, "present")
    assert memory.appends() == [ENTRY]
    assert memory.blocks["notes"] == NOTES + ENTRY


async def test_a_chance_overlap_shorter_than_the_minimum_is_not_taken_for_a_cut(
    proxy: Client, memory: MemoryService
) -> None:
    memory.blocks["notes"] = "todo:\n- "
    status, headers, _ = await append(proxy, "- call Ada\n")

    assert (status, headers["Idem-Append"]) == (200, "appended")
    assert memory.blocks["notes"] == "todo:\n- - call Ada\n"


async def test_the_first_append_to_a_new_block_is_sent(
    proxy: Client, memory: MemoryService
) -> None:
    status, headers, _ = await append(proxy, ENTRY)

    assert (status, headers["Idem-Append"]) == (200, "appended")
    assert memory.blocks["notes"] == ENTRY


async def test_a_failing_read_back_sends_nothing_and_a_retry_appends_once(
    proxy: Client, memory: MemoryService
) -> None:
    memory.blocks["notes"] = NOTES
    memory.plan("read", Planned(Fault.FAIL_BEFORE, status=500))

    status, headers, body = await append(proxy, ENTRY)

    assert (status, headers["Idem-Outcome"], headers["x-should-retry"]) == (
        502,
        "upstream-unreachable",
        "true",
    )
    assert "nothing was appended" in orjson.loads(body)["detail"]
    assert memory.appends() == []

    status, headers, _ = await append(proxy, ENTRY)
    assert (status, headers["Idem-Append"]) == (200, "appended")
    assert memory.blocks["notes"] == NOTES + ENTRY


async def test_an_append_without_its_text_is_refused_unsent(
    proxy: Client, memory: MemoryService
) -> None:
    memory.blocks["notes"] = NOTES
    headers = {"Idem-Batch": "batch-1", "Idem-Tool-Call": "call-1"}
    async with proxy.post(
        "/up/v1/blocks/notes/append", json={"txt": ENTRY}, headers=headers
    ) as answer:
        problem = await answer.json()

    assert (answer.status, problem["type"].rsplit("/", 1)[1]) == (400, "invalid-request")
    assert "at /text" in problem["detail"]
    assert memory.appends() == []


@given(st.text(alphabet="ab\n", max_size=12), st.text(alphabet="ab\n", max_size=12))
def test_overlap_is_the_longest_start_of_the_text_the_value_ends_with(
    value: str, text: str
) -> None:
    overlap = tail_overlap(value, text)
    assert value.endswith(text[:overlap])
    assert not any(value.endswith(text[:longer]) for longer in range(overlap + 1, len(text) + 1))


@pytest.mark.parametrize(
    ("value", "text", "case", "rest"),
    [
        ("abc\n", "def\n", AppendCase.APPENDED, "def\n"),
        ("abc\ndef\n", "def\n", AppendCase.PRESENT, ""),
        ("abc\nde", "def\n", AppendCase.REMAINDER, "f\n"),
        ("abc\n", "\nxyz", AppendCase.APPENDED, "\nxyz"),  # one char of overlap is chance
    ],
)
def test_decide(value: str, text: str, case: AppendCase, rest: str) -> None:
    assert decide(value, text, min_overlap_chars=2) == (case, rest)


@pytest.mark.parametrize(
    ("value", "text", "case", "rest"),
    [
        ("notes\n- tea", "- tea\n", AppendCase.PRESENT, ""),  # the upstream trimmed the text
        ("notes\n- tea  \n\n", "\n- tea", AppendCase.PRESENT, ""),
        ("notes\n- coffee", "- tea\n", AppendCase.APPENDED, "- tea\n"),
        ("notes\n", "  \n", AppendCase.APPENDED, "  \n"),  # only whitespace: the usual rules
        ("notes\n- t", "- tea\n", AppendCase.REMAINDER, "ea\n"),
    ],
)
def test_decide_ignoring_surrounding_whitespace(
    value: str, text: str, case: AppendCase, rest: str
) -> None:
    assert decide(value, text, 2, ignore_whitespace=True) == (case, rest)


def test_whitespace_counts_as_text_by_default() -> None:
    # The newline the upstream trimmed is taken for the rest of an append cut off.
    assert decide("notes\n- tea", "- tea\n", 2) == (AppendCase.REMAINDER, "\n")
    assert decide("notes\n- tea  ", "- tea", 2) == (AppendCase.APPENDED, "- tea")


async def test_the_answer_says_how_many_bytes_were_skipped(
    proxy: Client, memory: MemoryService
) -> None:
    memory.blocks["notes"] = NOTES
    memory.cut_next_after_chars = 12
    await append(proxy, ENTRY)

    _, finished, _ = await append(proxy, ENTRY)
    _, present, _ = await append(proxy, ENTRY, tool_call="call-1-rerun")
    _, appended, _ = await append(proxy, "- é\n", tool_call="call-2")

    assert finished[SKIPPED_HEADER] == "12"
    assert present[SKIPPED_HEADER] == str(len(ENTRY.encode()))
    assert appended[SKIPPED_HEADER] == "0"


async def test_an_upstream_that_trims_is_not_appended_twice_when_whitespace_is_ignored(
    make_proxy: ProxyFactory, upstream: TestServer, tmp_path: Path, memory: MemoryService
) -> None:
    policy = tmp_path / "trimming.yaml"
    policy.write_text(POLICY.replace("content: /text}", "content: /text,"
                                     " ignore_surrounding_whitespace: true}"))  # fmt: skip
    client, _ = await make_proxy(
        policy=str(policy), **{"upstreams.up.url": str(upstream.make_url(""))}
    )
    memory.blocks["notes"] = NOTES + ENTRY.strip()  # stored trimmed, as such an upstream does

    status, headers, _ = await append(client, ENTRY, tool_call="call-1-rerun")

    assert (status, headers["Idem-Append"]) == (200, "present")
    assert headers[SKIPPED_HEADER] == str(len(ENTRY.encode()))
    assert memory.appends() == []
