"""Tenant scopes: two accounts never share a record, and unscoped keys stay as they were."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from idemproxy.effectkeys import KeyHeaders, resolve_effect_key
from idemproxy.policies.kinds import CredentialIdentity
from idemproxy.policies.route import Route
from idemproxy.policies.scope import Scope
from idemproxy.scopes import SCOPE_MARK, request_scope, scope_of, scoped
from idemproxy.store.records import RecordKey

STRIPE_LIKE = Scope(headers=("Stripe-Account",), credential=CredentialIdentity.STRIPE_MODE)
values = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40)


def scope_with(scope: Scope, **headers: str) -> str:
    return request_scope(scope, CIMultiDict(headers))


def test_a_request_without_account_or_identity_has_no_scope() -> None:
    assert scope_with(STRIPE_LIKE) == ""
    assert scope_with(STRIPE_LIKE, Authorization="Bearer not-a-stripe-key") == ""
    assert scope_with(Scope(), Authorization="Bearer sk_live_x", Stripe_Account="acct_1") == ""


def test_its_key_is_exactly_the_unscoped_one() -> None:
    key = resolve_effect_key(KeyHeaders(idempotency_key="k"), Route(name="w"), "agent", "f")
    assert scoped(key, "") is key
    assert key is not None
    assert key.record_key == RecordKey("agent", "ik:k")
    assert scoped(None, "abc") is None


def test_accounts_and_modes_scope_but_the_secret_does_not() -> None:
    a = scope_with(STRIPE_LIKE, **{"Stripe-Account": "acct_A", "Authorization": "Bearer sk_test_1"})
    rolled = scope_with(
        STRIPE_LIKE, **{"stripe-account": " acct_A ", "authorization": "Bearer sk_test_2"}
    )
    b = scope_with(STRIPE_LIKE, **{"Stripe-Account": "acct_B", "Authorization": "Bearer sk_test_1"})
    live = scope_with(
        STRIPE_LIKE, **{"Stripe-Account": "acct_A", "Authorization": "Bearer sk_live_1"}
    )
    assert a == rolled
    assert len({a, b, live}) == 3
    assert "acct_A" not in a
    assert "sk_test_1" not in a


def test_a_scoped_key_keeps_its_kind_and_never_equals_an_unscoped_one() -> None:
    key = resolve_effect_key(
        KeyHeaders(batch="b", tool_call="c", step="1"), Route(name="w"), "agent", "f"
    )
    assert key is not None
    inside = scoped(key, "0123abcd")
    assert inside is not None
    assert inside.record_key == RecordKey("agent", "tc:b:c:s-1" + SCOPE_MARK + "0123abcd")
    assert (inside.source, inside.explicit, inside.batch) == (key.source, True, "b")


@given(values, values)
def test_distinct_account_values_never_share_a_scope(first: str, second: str) -> None:
    scope = Scope(headers=("X-Account", "X-Project"))
    one = scope_with(scope, **{"X-Account": first})
    other = scope_with(scope, **{"X-Project": first})
    assert one != other
    if first.strip() != second.strip():
        assert one != scope_with(scope, **{"X-Account": second})


def test_the_scope_of_a_stored_key_is_read_back() -> None:
    assert scope_of(RecordKey("agent", "ik:k" + SCOPE_MARK + "0123abcd")) == "0123abcd"
    assert scope_of(RecordKey("agent", "ik:k")) == ""
