"""Tenant scopes: whose records a request reads and writes (SPEC section 3).

Two accounts that happen to send the same ``Idempotency-Key`` (or the same batch and tool call)
are two effects. The policy's ``scope`` names what tells them apart: account headers such as
``Stripe-Account`` and the identity the credential names. The scope enters the effect key as a
suffix, and only when it is not empty, so requests that carry none keep the keys they always
had and their records keep replaying.

The suffix is a digest, although nothing that goes into it is secret (account ids, a DID, a
bot's user id, a Stripe mode): header values are the client's to choose, and a digest keeps the
key short and of one character set whatever they hold.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace

import orjson

from idemproxy.credentials import credential_identity
from idemproxy.effectkeys import EffectKey
from idemproxy.policies.scope import Scope
from idemproxy.store.records import RecordKey

# Parts of an effect id never hold a bare ':' (they are percent-encoded), so a scoped id can
# never equal an unscoped one.
SCOPE_MARK = ":sc-"


def request_scope(scope: Scope, headers: Mapping[str, str]) -> str:
    """The scope of a request as a digest, ``""`` when it carries none.

    ``headers`` must look names up case-insensitively, as aiohttp's and multidict's do.
    """
    # Sorted: reordering the policy's header list must not move every record.
    parts = sorted(
        ("header", name.lower(), value) for name, value in _account_values(scope, headers)
    )
    identity = credential_identity(scope.credential, headers.get("Authorization"))
    if identity:
        parts.append(("credential", str(scope.credential), identity))
    if not parts:
        return ""
    return hashlib.blake2b(
        orjson.dumps(parts), digest_size=12, person=b"idemproxy-scope"
    ).hexdigest()


def scoped(key: EffectKey | None, scope: str) -> EffectKey | None:
    """``key`` within ``scope``: unchanged when the scope is empty."""
    if key is None or not scope:
        return key
    record_key = RecordKey(key.record_key.agent, key.record_key.effect_id + SCOPE_MARK + scope)
    return replace(key, record_key=record_key)


def scope_of(record_key: RecordKey) -> str:
    """The scope a stored record was made in, ``""`` for an unscoped one."""
    _, mark, scope = record_key.effect_id.rpartition(SCOPE_MARK)
    return scope if mark else ""


def _account_values(scope: Scope, headers: Mapping[str, str]) -> list[tuple[str, str]]:
    # An empty header names no account: the upstream acts on the credential's own.
    present = ((name, headers.get(name, "").strip()) for name in scope.headers)
    return [(name, value) for name, value in present if value]
