"""The Discord adapter: a nonce derived from the effect, enforced, on JSON message sends."""

from __future__ import annotations

import orjson

from idemproxy.policies.adapters.discord import DiscordAdapter, discord_nonce
from tests.policies.adapters.test_base import attempt


def test_discord_sets_a_derived_enforced_nonce_on_json_sends_only() -> None:
    adapter = DiscordAdapter(120)
    sent = adapter.outgoing(attempt(b'{"content":"hi","nonce":"81237","tts":false}'))
    assert sent.native
    assert orjson.loads(sent.body) == {
        "content": "hi",
        "nonce": discord_nonce("agent/tc:1"),
        "enforce_nonce": True,
        "tts": False,
    }
    multipart = adapter.outgoing(attempt(b"--x\r\n...", "multipart/form-data; boundary=x"))
    assert not multipart.native
    assert multipart.body == b"--x\r\n..."
