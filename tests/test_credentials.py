"""Reading the identity a credential names, so a rotated credential keeps its records."""

from __future__ import annotations

import base64

import orjson
import pytest

from idemproxy.credentials import credential_identity
from idemproxy.policies.kinds import CredentialIdentity

ALICE = "did:plc:alice0000000000000000000"
BOB = "did:plc:bob000000000000000000000"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def access_jwt(subject: object, issued_at: int = 1_700_000_000) -> str:
    header = b64(orjson.dumps({"typ": "at+jwt", "alg": "ES256K"}))
    claims = {"scope": "com.atproto.access", "sub": subject, "iat": issued_at}
    return f"{header}.{b64(orjson.dumps(claims))}.{b64(issued_at.to_bytes(8, 'big'))}"


def bot_token(user_id: str, secret: str) -> str:
    return f"Bot {b64(user_id.encode())}.GhJk1a.{secret}"


def test_a_refreshed_bluesky_token_names_the_same_account() -> None:
    first = credential_identity(CredentialIdentity.JWT_SUBJECT, f"Bearer {access_jwt(ALICE)}")
    refreshed = access_jwt(ALICE, issued_at=1_700_007_200)
    assert first == ALICE
    assert credential_identity(CredentialIdentity.JWT_SUBJECT, f"Bearer {refreshed}") == ALICE
    assert credential_identity(CredentialIdentity.JWT_SUBJECT, f"DPoP {refreshed}") == ALICE
    assert credential_identity(CredentialIdentity.JWT_SUBJECT, f"Bearer {access_jwt(BOB)}") == BOB


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer opaque-session-token",
        "Bearer a.b",
        f"Bearer x.{b64(b'not json')}.y",
        f"Bearer x.{b64(b'[1]')}.y",
        f"Bearer {access_jwt(42)}",
        f"Bearer {access_jwt('alice.bsky.social')}",
        f"Basic {access_jwt(ALICE)}",
    ],
)
def test_a_token_that_names_no_did_gives_no_identity(authorization: str) -> None:
    # The PDS refuses such a token, so nothing it sends is ever applied.
    assert credential_identity(CredentialIdentity.JWT_SUBJECT, authorization) == ""


def test_a_reset_discord_bot_token_names_the_same_bot() -> None:
    rule = CredentialIdentity.DISCORD_BOT
    bot = "1234567890123456789"
    assert credential_identity(rule, bot_token(bot, "first-secret")) == bot
    assert credential_identity(rule, bot_token(bot, "after-reset")) == bot
    assert credential_identity(rule, bot_token("987654321098765432", "x")) == "987654321098765432"
    for unreadable in ("Bot test-token", "Bearer oauth-access-token", bot_token("bot", "x")):
        assert credential_identity(rule, unreadable) == ""


def test_stripe_keys_name_their_mode_only() -> None:
    rule = CredentialIdentity.STRIPE_MODE
    assert credential_identity(rule, "Bearer sk_test_51Habc") == "test"
    assert credential_identity(rule, "Bearer sk_test_rolled_key") == "test"
    assert credential_identity(rule, "Bearer rk_live_51Habc") == "live"
    basic = base64.b64encode(b"sk_live_51Habc:").decode()
    assert credential_identity(rule, f"Basic {basic}") == "live"
    assert credential_identity(rule, "Bearer pk_test_publishable") == ""
    assert credential_identity(rule, "Bearer sk_idemproxy") == ""


def test_no_rule_or_no_credential_gives_no_identity() -> None:
    assert credential_identity(CredentialIdentity.NONE, "Bearer sk-proj-abc") == ""
    assert credential_identity(CredentialIdentity.JWT_SUBJECT, None) == ""
