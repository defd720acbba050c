"""stripe-python through the proxy: one PaymentIntent per tool call, whatever happens."""

from __future__ import annotations

from typing import Any

import pytest
import stripe

from idemproxy.policies.adapters.stripe import stripe_key
from tests.sdk.conftest import Fakes, tool_call
from tests.support.fakes.service import Fault, Planned
from tests.support.processes import ServedProxy


def new_client(
    proxy: ServedProxy, retries: int = 2, api_key: str = "sk_test_idemproxy"
) -> stripe.StripeClient:
    """A fresh SDK client, as an agent restarted after a crash builds one."""
    return stripe.StripeClient(
        api_key,
        base_addresses={"api": f"{proxy.url}/stripe"},
        max_network_retries=retries,
    )


def create_intent(client: stripe.StripeClient, run_id: str) -> stripe.PaymentIntent:
    params: Any = {"amount": 1999, "currency": "usd", "metadata": {"run": run_id}}
    return client.v1.payment_intents.create(params, {"headers": tool_call(run_id)})


def answer_headers(obj: stripe.StripeObject) -> Any:
    """The HTTP headers of the answer an SDK object was built from."""
    assert obj.last_response is not None
    return obj.last_response.headers


def intents(fakes: Fakes, run_id: str) -> list[dict[str, Any]]:
    return [e for e in fakes.stripe.effects if e["metadata"].get("run") == run_id]


def test_a_rerun_after_a_crash_replays_the_same_intent(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    first = create_intent(new_client(proxy), run_id)
    again = create_intent(new_client(proxy), run_id)

    assert again.id == first.id
    assert len(intents(fakes, run_id)) == 1
    assert answer_headers(again)["Idem-Outcome"] == "replayed"
    sent = fakes.stripe.seen_on("/v1/payment_intents")
    keys = {s.headers["Idempotency-Key"] for s in sent if run_id.encode() in s.body}
    # The SDK's random key was replaced by one derived from the tool call.
    assert len(keys) == 1
    assert keys.pop().startswith("idemproxy-")


def test_an_sdk_retry_after_a_503_makes_one_intent(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    fakes.stripe.plan(
        "create",
        Planned(
            Fault.FAIL_BEFORE,
            503,
            {"error": {"type": "api_error", "message": "try again"}},
            {"Stripe-Should-Retry": "true"},
        ),
    )
    intent = create_intent(new_client(proxy), run_id)

    assert intent.amount == 1999
    assert len(intents(fakes, run_id)) == 1
    assert answer_headers(intent)["Idem-Outcome"] == "reconciled"


def test_an_unknown_outcome_is_reconciled_by_resending_under_the_same_key(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    fakes.stripe.plan("create", Planned(Fault.DROP_AFTER))
    with pytest.raises(stripe.APIError) as lost:
        create_intent(new_client(proxy, retries=0), run_id)  # then the agent crashed
    assert lost.value.http_status == 502
    assert "a retry with the same key settles the outcome" in str(lost.value.http_body)
    assert len(intents(fakes, run_id)) == 1

    rerun = create_intent(new_client(proxy), run_id)

    assert rerun.id == intents(fakes, run_id)[0]["id"]
    assert len(intents(fakes, run_id)) == 1
    assert answer_headers(rerun)["Idem-Outcome"] == "reconciled"
    # Stripe itself answered the re-send from its idempotency cache.
    assert answer_headers(rerun)["Idempotent-Replayed"] == "true"
    resent = [s for s in fakes.stripe.seen_on("/v1/payment_intents") if run_id.encode() in s.body]
    assert len(resent) == 2
    assert {s.headers["Idempotency-Key"] for s in resent} == {
        stripe_key(answer_headers(rerun)["Idem-Key"])
    }


def test_an_sdk_retry_after_a_lost_connection_reconciles_it_in_the_same_call(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    fakes.stripe.plan("create", Planned(Fault.DROP_AFTER))

    intent = create_intent(new_client(proxy), run_id)

    # The proxy's 502 told the SDK a retry helps; the retry re-sent under the same key.
    assert intent.id == intents(fakes, run_id)[0]["id"]
    assert len(intents(fakes, run_id)) == 1
    assert answer_headers(intent)["Idem-Outcome"] == "reconciled"


def create_intent_on(
    client: stripe.StripeClient, run_id: str, account: str, key: str
) -> stripe.PaymentIntent:
    """The same order, on behalf of a connected account, under the agent's own key."""
    params: Any = {"amount": 1999, "currency": "usd", "metadata": {"run": run_id}}
    return client.v1.payment_intents.create(
        params, {"stripe_account": account, "idempotency_key": key}
    )


def test_two_accounts_under_one_idempotency_key_each_get_their_own_intent(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    key = f"order-{run_id}"
    account_a, account_b = f"acct_a{run_id}", f"acct_b{run_id}"
    client_a = new_client(proxy, api_key=f"sk_test_a{run_id}")
    client_b = new_client(proxy, api_key=f"sk_test_b{run_id}")

    first_a = create_intent_on(client_a, run_id, account_a, key)
    first_b = create_intent_on(client_b, run_id, account_b, key)

    assert first_b.id != first_a.id
    assert answer_headers(first_b)["Idem-Outcome"] == "forwarded"
    made = {fakes.stripe.accounts[intent["id"]] for intent in intents(fakes, run_id)}
    assert made == {account_a, account_b}
    again_a = create_intent_on(client_a, run_id, account_a, key)
    again_b = create_intent_on(client_b, run_id, account_b, key)
    assert (again_a.id, again_b.id) == (first_a.id, first_b.id)
    assert answer_headers(again_b)["Idem-Outcome"] == "replayed"
    assert len(intents(fakes, run_id)) == 2
    sent = [s for s in fakes.stripe.seen_on("/v1/payment_intents") if run_id.encode() in s.body]
    # Stripe itself sees a native key of each account's own.
    assert len({s.headers["Idempotency-Key"] for s in sent}) == 2


def test_a_rolled_api_key_of_the_same_account_replays_its_intent(
    proxy: ServedProxy, fakes: Fakes, run_id: str
) -> None:
    key, account = f"order-{run_id}", f"acct_{run_id}"
    first = create_intent_on(
        new_client(proxy, api_key=f"sk_test_old{run_id}"), run_id, account, key
    )

    rolled = new_client(proxy, api_key=f"sk_test_rolled{run_id}")
    again = create_intent_on(rolled, run_id, account, key)

    assert again.id == first.id
    assert answer_headers(again)["Idem-Outcome"] == "replayed"
    assert len(intents(fakes, run_id)) == 1
