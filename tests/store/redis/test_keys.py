"""Key names that no crafted id can bend, each agent's in one slot."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from idemproxy.store.records import RecordKey
from idemproxy.store.redis import keys as layout
from tests.store.test_contract import HOSTILE_SUFFIXES

# Ids are text (the proxy admits only visible ASCII); key names must hold up to any of it.
ANY_TEXT = st.text(st.characters(codec="utf-8"))


@given(ANY_TEXT, ANY_TEXT)
def test_distinct_ids_never_share_a_key(first: str, second: str) -> None:
    keys = {
        layout.record_key(RecordKey(first, second)),
        layout.record_key(RecordKey(second, first)),
        layout.outbox_key(first),
        layout.unknown_key(first),
        layout.batch_key(first, second),
    }
    assert len(keys) == (4 if first == second else 5)
    if first != second:
        assert layout.agent_tag(first) != layout.agent_tag(second)


@given(ANY_TEXT)
def test_an_encoded_id_holds_no_key_syntax(value: str) -> None:
    encoded = layout.encode_id(value)
    assert not {"{", "}", ":"} & set(encoded)
    assert layout.agent_tag(value).count("{") == 1
    assert layout.agent_tag(value) != "{}"


@given(ANY_TEXT)
def test_ids_are_encoded_exactly_as_percent_encoding_does(value: str) -> None:
    # Keys already in a store were written with urllib's quote; they must still be found.
    assert layout.encode_id(value) == quote(value, safe="")


@pytest.mark.parametrize("suffix", [*HOSTILE_SUFFIXES, "{a}{b}", "}{", "\n", "\x00"])
def test_every_key_of_an_agent_hashes_to_one_slot(suffix: str) -> None:
    agent = "agent" + suffix
    keys = [
        layout.record_key(RecordKey(agent, "{x}:y")),
        layout.record_key(RecordKey(agent, "")),
        layout.outbox_key(agent),
        layout.unknown_key(agent),
        layout.batch_key(agent, "{batch}"),
    ]
    assert len({key_slot(key.encode()) for key in keys}) == 1
    assert all(key.count("{") == 1 and key.count("}") == 1 for key in keys)


def test_an_empty_agent_still_has_a_hash_tag() -> None:
    keys = [layout.outbox_key(""), layout.record_key(RecordKey("", "a")), layout.unknown_key("")]
    assert len({key_slot(key.encode()) for key in keys}) == 1
    assert layout.agent_tag("") != layout.agent_tag("%")


def test_a_batch_archive_of_outcomes_is_named_from_its_set_and_shares_the_agents_slot() -> None:
    outcomes = layout.outcomes_key("agent:1", "b:1")
    assert outcomes == layout.batch_key("agent:1", "b:1") + ":outcomes"
    assert key_slot(outcomes.encode()) == key_slot(layout.outbox_key("agent:1").encode())
    # No batch's set can be named like another batch's archive: an encoded batch has no ':'.
    assert layout.batch_key("agent:1", "b:1:outcomes") != outcomes
