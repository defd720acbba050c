"""The identity a request's credential names, read without keeping the credential.

A token rotates (Bluesky access JWTs every couple of hours, OAuth tokens, a reset bot token, a
rolled API key) while the identity it stands for stays: so a scope is built from the identity
and never from the token. Each rule reads only what its upstream documents as stable. A
credential a rule cannot read an identity from gives none (the upstream itself refuses such a
credential, so no effect of it is ever recorded as applied), which leaves the scope to the
account headers and ``Idem-Agent``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

import orjson

from idemproxy.policies.kinds import CredentialIdentity

# sk_ secret keys and rk_ restricted keys; Stripe keeps test and live data apart.
_STRIPE_MODE = re.compile(r"(?:sk|rk)_(test|live)_")
_DID = re.compile(r"did:[a-z]+:[A-Za-z0-9._:%-]{1,2048}")
_SNOWFLAKE = re.compile(r"[0-9]{1,20}")


def credential_identity(rule: CredentialIdentity, authorization: str | None) -> str:
    """The identity ``authorization`` names under ``rule``; ``""`` when it names none."""
    if authorization is None or rule is CredentialIdentity.NONE:
        return ""
    scheme, _, token = authorization.strip().partition(" ")
    return _READERS[rule](scheme.lower(), token.strip())


def _stripe_mode(scheme: str, token: str) -> str:
    if scheme == "basic":  # curl -u sk_test_...: sends the key as the user name
        token = _b64decode(token).partition(b":")[0].decode("ascii", "replace")
    elif scheme != "bearer":
        return ""
    mode = _STRIPE_MODE.match(token)
    return mode.group(1) if mode else ""


def _jwt_subject(scheme: str, token: str) -> str:
    """The DID in ``sub``; the signature is the upstream's to check, the proxy cannot."""
    if scheme not in ("bearer", "dpop"):
        return ""
    segments = token.split(".")
    if len(segments) != 3:
        return ""
    try:
        claims = orjson.loads(_b64decode(segments[1]))
    except orjson.JSONDecodeError:
        return ""
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) and _DID.fullmatch(subject) else ""


def _discord_bot(scheme: str, token: str) -> str:
    """The bot's user id: a bot token starts with it in base64, and a reset keeps that part."""
    if scheme != "bot":
        return ""
    user_id = _b64decode(token.partition(".")[0]).decode("ascii", "replace")
    return user_id if _SNOWFLAKE.fullmatch(user_id) else ""


def _b64decode(text: str) -> bytes:
    """Padded or not, standard or URL-safe alphabet; b"" for anything else."""
    try:
        return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_") + "==")
    except (binascii.Error, ValueError):
        return b""


_READERS: dict[CredentialIdentity, Callable[[str, str], str]] = {
    CredentialIdentity.STRIPE_MODE: _stripe_mode,
    CredentialIdentity.JWT_SUBJECT: _jwt_subject,
    CredentialIdentity.DISCORD_BOT: _discord_bot,
}
