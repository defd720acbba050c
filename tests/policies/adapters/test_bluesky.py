"""The Bluesky adapter: record keys near the first attempt, and read-backs that prove a write.

The getRecord answers here are shaped as the reference PDS (0.5) gives them: the value with the
``$type`` the PDS adds, and ``RecordNotFound`` as a 400. tests/pds drives the real server.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from idemproxy.policies.adapters import tid
from idemproxy.policies.adapters.base import Answer, Attempt, Found, Outgoing
from idemproxy.policies.adapters.bluesky import BlueskyAdapter, derived_tid, digest_tid

XRPC = "/xrpc/com.atproto.repo."
REPO = "did:plc:agent"
POST = "app.bsky.feed.post"
FIRST_ATTEMPT_MS = 1_796_153_116_314  # 2026-12-01
TID_SYNTAX = re.compile(r"^[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}$")
NOT_FOUND = Answer(400, b'{"error":"RecordNotFound","message":"Could not locate record"}')
CREATED_AT = "/record/createdAt"
KEYS = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=80)
adapter = BlueskyAdapter()


def attempt(method: str, document: dict[str, Any], *volatile: str, key: str = "a/tc:1") -> Attempt:
    body = orjson.dumps(document)
    return Attempt(XRPC + method, key, body, "application/json", FIRST_ATTEMPT_MS, volatile)


def post(text: str, created_at: str = "2026-12-01T10:00:00.000Z") -> dict[str, Any]:
    return {"$type": POST, "text": text, "createdAt": created_at}


def create(record: dict[str, Any], **extra: str) -> dict[str, Any]:
    return {"repo": REPO, "collection": POST, "record": record, **extra}


def found(rkey: str, value: dict[str, Any], collection: str = POST) -> Answer:
    uri = f"at://{REPO}/{collection}/{rkey}"
    return Answer(200, orjson.dumps({"uri": uri, "cid": f"bafy-{rkey}", "value": value}))


def rkeys_of(sent: Outgoing) -> list[str]:
    document = orjson.loads(sent.body)
    writes = document.get("writes", [document])
    return [w["rkey"] for w in writes]


def finding_of(tried: Attempt, *answers: Answer) -> tuple[Found, Any, str]:
    sent = adapter.outgoing(tried)
    finding = adapter.finding(tried, sent, answers)
    return finding.found, orjson.loads(finding.body) if finding.body else None, finding.detail


@given(KEYS, st.integers(1_600_000_000_000, 2_000_000_000_000), st.integers(0, 200))
def test_a_derived_key_is_a_tid_of_the_first_attempts_time(
    key: str, first_attempt_ms: int, write: int
) -> None:
    rkey = derived_tid(key, first_attempt_ms, write)
    assert TID_SYNTAX.match(rkey)
    assert derived_tid(key, first_attempt_ms, write) == rkey
    assert 0 <= tid.micros_of(rkey) - first_attempt_ms * 1000 < 1000 + 200


@given(KEYS, KEYS)
def test_effects_a_millisecond_apart_get_keys_in_that_order(a: str, b: str) -> None:
    assert derived_tid(a, FIRST_ATTEMPT_MS) < derived_tid(b, FIRST_ATTEMPT_MS + 1)


def test_effects_claimed_in_the_same_millisecond_get_keys_of_their_own() -> None:
    # A batch's tool calls, all at once: the microseconds and clock id come from each key.
    keys = {derived_tid(f"agent/batch-1:call-{n}", FIRST_ATTEMPT_MS) for n in range(100)}
    assert len(keys) == 100


def test_a_create_without_a_key_gets_the_derived_one_and_keeps_its_own() -> None:
    bare = attempt("createRecord", create(post("hi")))
    sent = adapter.outgoing(bare)
    assert sent.native
    assert orjson.loads(sent.body) == {
        **create(post("hi")),
        "rkey": derived_tid("a/tc:1", FIRST_ATTEMPT_MS),
    }
    own = adapter.outgoing(attempt("createRecord", create(post("hi"), rkey="self")))
    assert rkeys_of(own) == ["self"]
    assert not adapter.outgoing(attempt("createRecord", {"text": "not a create"})).native


def test_each_create_of_apply_writes_gets_a_key_in_write_order() -> None:
    writes = [
        {"$type": "com.atproto.repo.applyWrites#create", "collection": POST, "value": post("a")},
        {"$type": "com.atproto.repo.applyWrites#delete", "collection": POST, "rkey": "3old"},
        {"$type": "com.atproto.repo.applyWrites#create", "collection": POST, "value": post("b")},
        {"$type": "com.atproto.repo.applyWrites#create", "collection": POST, "rkey": "mine",
         "value": post("c")},
    ]  # fmt: skip
    sent = adapter.outgoing(attempt("applyWrites", {"repo": REPO, "writes": writes}))
    assert sent.native
    first, second = (
        derived_tid("a/tc:1", FIRST_ATTEMPT_MS, 0),
        derived_tid("a/tc:1", FIRST_ATTEMPT_MS, 1),
    )
    assert rkeys_of(sent) == [first, "3old", second, "mine"]
    assert first < second


def test_put_delete_and_blob_uploads_are_sent_as_they_are() -> None:
    writes: list[tuple[str, dict[str, Any]]] = [
        ("putRecord", {"repo": REPO, "collection": POST, "rkey": "3k", "record": post("x")}),
        ("deleteRecord", {"repo": REPO, "collection": POST, "rkey": "3k"}),
    ]
    for method, document in writes:
        tried = attempt(method, document)
        sent = adapter.outgoing(tried)
        assert (sent.native, sent.body) == (True, tried.body)
    blob = Attempt(XRPC + "uploadBlob", "a/tc:1", b"\x89PNG", "image/png", FIRST_ATTEMPT_MS)
    assert adapter.outgoing(blob) == Outgoing(b"\x89PNG", native=True)
    assert not adapter.reconciles_answer(XRPC + "uploadBlob", 500)
    assert adapter.reconciles_answer(XRPC + "createRecord", 500)


def test_a_create_is_read_back_under_its_key_and_the_key_earlier_versions_derived() -> None:
    tried = attempt("createRecord", create(post("hi")))
    reads = adapter.read_back(tried, adapter.outgoing(tried))
    query = f"/xrpc/com.atproto.repo.getRecord?repo=did%3Aplc%3Aagent&collection={POST}&rkey="
    assert [r.path_qs for r in reads] == [
        query + derived_tid("a/tc:1", FIRST_ATTEMPT_MS),
        query + digest_tid("a/tc:1"),
    ]
    own = attempt("createRecord", create(post("hi"), rkey="self"))
    assert [r.path_qs for r in adapter.read_back(own, adapter.outgoing(own))] == [query + "self"]


def test_a_create_found_with_the_value_sent_is_applied() -> None:
    # The repeat of a restarted agent: the SDK stamped a new createdAt, and the PDS added $type.
    repeat = attempt("createRecord", create({"text": "hi", "createdAt": "later"}), CREATED_AT)
    rkey = derived_tid("a/tc:1", FIRST_ATTEMPT_MS)
    stored = {"text": "hi", "$type": POST, "createdAt": "2026-12-01T10:00:00.000Z"}

    assert finding_of(repeat, found(rkey, stored), NOT_FOUND)[:2] == (
        Found.PRESENT,
        {"uri": f"at://{REPO}/{POST}/{rkey}", "cid": f"bafy-{rkey}"},
    )


def test_a_create_whose_key_holds_another_record_did_not_happen() -> None:
    profile = "app.bsky.actor.profile"
    mine = {"repo": REPO, "collection": profile, "rkey": "self",
            "record": {"$type": profile, "displayName": "B"}}  # fmt: skip
    theirs = {"$type": profile, "displayName": "A"}

    status, body, detail = finding_of(attempt("createRecord", mine), found("self", theirs, profile))

    assert (status, body) == (Found.ABSENT, None)
    assert "another record" in detail


def test_a_create_made_by_an_earlier_version_is_found_under_its_key() -> None:
    tried = attempt("createRecord", create(post("hi")))
    earlier = digest_tid("a/tc:1")
    status, body, _ = finding_of(tried, NOT_FOUND, found(earlier, post("hi")))
    assert (status, body["uri"]) == (Found.PRESENT, f"at://{REPO}/{POST}/{earlier}")
    assert finding_of(tried, NOT_FOUND, NOT_FOUND)[0] is Found.ABSENT


def test_a_create_that_sends_no_value_is_never_taken_for_one_found() -> None:
    # The PDS refuses such a request; a read-back must not fail on it either.
    tried = attempt("createRecord", {"repo": REPO, "collection": POST})
    assert finding_of(tried, found("3k", post("x")), NOT_FOUND)[0] is Found.ABSENT


@pytest.mark.parametrize(
    "answer",
    [Answer(502, b"bad gateway"), Answer(400, b'{"error":"InvalidRequest"}'), Answer(200, b"{}")],
)
def test_an_answer_that_shows_nothing_leaves_it_unsure(answer: Answer) -> None:
    tried = attempt("createRecord", create(post("hi")))
    assert finding_of(tried, answer, NOT_FOUND)[0] is Found.UNSURE


def test_a_put_is_applied_only_when_the_record_holds_its_value() -> None:
    put = {"repo": REPO, "collection": POST, "rkey": "3k", "record": post("new")}
    tried = attempt("putRecord", put, CREATED_AT)
    assert finding_of(tried, found("3k", post("new", "earlier")))[:2] == (
        Found.PRESENT,
        {"uri": f"at://{REPO}/{POST}/3k", "cid": "bafy-3k"},
    )
    # The old value, or someone's later write: nothing proves either way.
    assert finding_of(tried, found("3k", post("old")))[0] is Found.UNSURE
    assert finding_of(tried, NOT_FOUND)[0] is Found.ABSENT


def test_a_delete_is_applied_when_the_record_is_gone() -> None:
    tried = attempt("deleteRecord", {"repo": REPO, "collection": POST, "rkey": "3k"})
    assert finding_of(tried, NOT_FOUND)[:2] == (Found.PRESENT, {})
    assert finding_of(tried, found("3k", post("x")))[0] is Found.ABSENT


def test_apply_writes_is_one_commit() -> None:
    writes = [
        {"$type": "com.atproto.repo.applyWrites#create", "collection": POST, "value": post("a")},
        {"$type": "com.atproto.repo.applyWrites#create", "collection": POST, "value": post("b")},
        {"$type": "com.atproto.repo.applyWrites#delete", "collection": POST, "rkey": "3old"},
    ]
    tried = attempt("applyWrites", {"repo": REPO, "writes": writes}, "/writes/*/value/createdAt")
    first, second = rkeys_of(adapter.outgoing(tried))[:2]

    status, body, _ = finding_of(
        tried, found(first, post("a")), found(second, post("b")), NOT_FOUND
    )

    assert status is Found.PRESENT
    assert body == {
        "results": [
            {"$type": "com.atproto.repo.applyWrites#createResult",
             "uri": f"at://{REPO}/{POST}/{first}", "cid": f"bafy-{first}"},
            {"$type": "com.atproto.repo.applyWrites#createResult",
             "uri": f"at://{REPO}/{POST}/{second}", "cid": f"bafy-{second}"},
            {"$type": "com.atproto.repo.applyWrites#deleteResult"},
        ]
    }  # fmt: skip
    assert finding_of(tried, NOT_FOUND, NOT_FOUND, found("3old", post("o")))[0] is Found.ABSENT
    # One create there and one missing cannot be one commit: someone else wrote or deleted.
    assert finding_of(tried, found(first, post("a")), NOT_FOUND, NOT_FOUND)[0] is Found.ABSENT


def test_account_and_session_answers_keep_the_client_on_the_proxy() -> None:
    account = {
        "did": "did:plc:a",
        "didDoc": {
            "id": "did:plc:a",
            "service": [
                {"id": "#atproto_pds", "type": "AtprotoPersonalDataServer",
                 "serviceEndpoint": "https://morel.us-east.host.bsky.network"},
                {"id": "#bsky_fg", "type": "BskyFeedGenerator",
                 "serviceEndpoint": "https://feed.example"},
            ],
        },
    }  # fmt: skip
    for method in ("createAccount", "createSession", "refreshSession", "getSession"):
        assert adapter.rewrites_session(f"/xrpc/com.atproto.server.{method}")
    assert not adapter.rewrites_session(XRPC + "createRecord")

    rewritten = orjson.loads(
        adapter.rewrite_session(orjson.dumps(account), "http://127.0.0.1:8080/bsky")
    )

    endpoints = [s["serviceEndpoint"] for s in rewritten["didDoc"]["service"]]
    assert endpoints == ["http://127.0.0.1:8080/bsky", "https://feed.example"]
    assert adapter.rewrite_session(b"not json", "http://x") == b"not json"
