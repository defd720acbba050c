"""idemproxy-events, the controller's side of delivery, as a controller gets it: its source
run on the standard library alone (tests/events/isolated.py), against what the proxy sends."""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
import time
import tomllib
from typing import Any

import pytest

from idemproxy.ledger import documents, signature
from idemproxy.store.records import EffectEvent, EffectMeta, EventType, RecordKey
from tests.events.isolated import PACKAGE_DIR, run_isolated

SECRET = "controller-secret-0123456789"
# What the proxy's dependencies are imported as; none may be reachable from the package.
SERVER_MODULES = ["aiohttp", "redis", "pydantic", "orjson", "yaml", "prometheus_client"]

RECEIVE = """
import base64, dataclasses, json
from idemproxy_events import RejectedDelivery, receive

given = json.loads(sys.stdin.read())
try:
    delivery = receive(given["secret"], given["headers"], base64.b64decode(given["body"]))
except RejectedDelivery as rejected:
    print(json.dumps({"status": rejected.status, "reason": rejected.reason}))
else:
    events = [
        {**dataclasses.asdict(event), "known_type": event.known_type and str(event.known_type)}
        for event in delivery.events
    ]
    print(json.dumps({"agent": delivery.agent, "events": events}))
"""


def proxy_event(event_id: str = "00000000000000000007") -> dict[str, object]:
    """An event document exactly as the proxy's delivery builds it."""
    event = EffectEvent(
        event_id=event_id,
        type=EventType.COMPLETED,
        key=RecordKey("support-bot", "tc:snowflake-42:call-1:r-chat_post_message"),
        meta=EffectMeta(
            batch="snowflake-42",
            tool_call="call-1",
            action="chat_post_message",
            upstream="slack",
            method="POST",
            path="/api/chat.postMessage",
        ),
        status=200,
        external_id="1767225600.000001",
        ts_ms=1_796_050_237_123,
        state="completed",
    )
    return documents.event(event)


def delivered(body: bytes, headers: dict[str, str], secret: str = SECRET) -> dict[str, Any]:
    """What the package makes of one POST, run isolated."""
    given = {"secret": secret, "headers": headers, "body": base64.b64encode(body).decode()}
    answer: dict[str, Any] = json.loads(run_isolated(RECEIVE, stdin=json.dumps(given)))
    return answer


def test_the_distribution_declares_no_dependencies() -> None:
    project = tomllib.loads((PACKAGE_DIR / "pyproject.toml").read_text())["project"]
    assert project["name"] == "idemproxy-events"
    assert project["dependencies"] == []
    assert "optional-dependencies" not in project


def test_it_imports_on_the_standard_library_alone() -> None:
    code = f"""
import importlib.util, json, pkgutil
import idemproxy_events
for module in pkgutil.iter_modules(idemproxy_events.__path__, "idemproxy_events."):
    importlib.import_module(module.name)
standard = {{*sys.stdlib_module_names, "__main__"}}
foreign = sorted({{name.partition(".")[0] for name in sys.modules}} - standard)
reachable = [name for name in {[*SERVER_MODULES, "idemproxy"]!r} if importlib.util.find_spec(name)]
print(json.dumps({{"foreign": foreign, "reachable": reachable}}))
"""
    loaded = json.loads(run_isolated(code))

    assert loaded == {"foreign": ["idemproxy_events"], "reachable": []}


def test_a_delivery_the_proxy_signed_is_verified_and_parsed_field_for_field() -> None:
    document = proxy_event()
    body = json.dumps({"agent": "support-bot", "events": [document]}).encode()

    answer = delivered(body, signature.signed_headers(SECRET, body))

    assert answer["agent"] == "support-bot"
    (event,) = answer["events"]
    assert event.pop("extra") == {}  # every field the proxy sends has a typed home
    assert event.pop("known_type") == "effect.completed"
    assert event == document


def test_a_forged_stale_or_foreign_delivery_is_refused_with_401() -> None:
    body = json.dumps({"agent": "support-bot", "events": [proxy_event()]}).encode()
    headers = signature.signed_headers(SECRET, body)
    stale = signature.signed_headers(SECRET, body, timestamp_s=int(time.time()) - 600)

    forged = delivered(body.replace(b"200", b"201"), headers)
    assert forged["status"] == 401
    assert "controller.secret" in str(forged["reason"])
    assert delivered(body, stale)["status"] == 401
    assert delivered(body, headers, secret="another-secret-0123456789")["status"] == 401
    assert delivered(body, {})["status"] == 401


def test_a_signed_body_that_is_no_delivery_is_refused_with_400_naming_the_field() -> None:
    broken = proxy_event()
    broken["status"] = "200"
    for body, says in [
        (b"not json", "not JSON"),
        (b'{"events": {}}', '"events": [...]'),
        (json.dumps({"agent": "a", "events": [broken]}).encode(), "'status' must be a int"),
    ]:
        answer = delivered(body, signature.signed_headers(SECRET, body))
        assert answer["status"] == 400
        assert says in str(answer["reason"])


def test_fields_and_types_a_newer_proxy_adds_are_kept_not_refused() -> None:
    newer = {**proxy_event(), "type": "effect.expired", "window_s": 120}
    body = json.dumps({"agent": "support-bot", "events": [newer]}).encode()

    (event,) = delivered(body, signature.signed_headers(SECRET, body))["events"]

    assert event["type"] == "effect.expired"
    assert event["known_type"] is None
    assert event["extra"] == {"window_s": 120}


def test_the_proxy_verifies_what_the_package_signs() -> None:
    body = json.dumps({"agent": "support-bot", "events": [proxy_event()]}).encode()
    code = f"""
from idemproxy_events import signed_headers
import json
print(json.dumps(signed_headers({SECRET!r}, {body!r})))
"""
    headers = json.loads(run_isolated(code))

    assert signature.verify(SECRET, headers, body)
    assert not signature.verify(SECRET, headers, body + b" ")


def test_the_package_knows_every_type_of_event_the_proxy_sends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = PACKAGE_DIR / "src" / "idemproxy_events" / "events.py"
    spec = importlib.util.spec_from_file_location("idemproxy_events_events", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look it up
    spec.loader.exec_module(module)

    assert {kind.value for kind in module.EventType} == {kind.value for kind in EventType}
