"""Whose records a request reads and writes: a policy's ``scope``."""

from __future__ import annotations

import re

from pydantic import field_validator

from idemproxy.policies.document import Frozen
from idemproxy.policies.kinds import CredentialIdentity

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 9110 token
# Their values are secrets, and a secret rotates: a scope is built from identities, never from
# credentials (a credential's identity is what ``credential`` reads).
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


class Scope(Frozen):
    """Whose records a request reads and writes: the account headers the upstream acts on
    behalf of, and the identity its credential names. A stored answer is never replayed to a
    request of another scope; requests that carry none keep the keys they always had."""

    headers: tuple[str, ...] = ()
    credential: CredentialIdentity = CredentialIdentity.NONE

    @field_validator("headers")
    @classmethod
    def _account_headers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        seen: set[str] = set()
        for name in value:
            lower = name.lower()
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r} is not an HTTP header name")
            if lower in _CREDENTIAL_HEADERS:
                raise ValueError(
                    f"{name} carries a secret that rotates, so it cannot scope records; set"
                    " 'credential' to the rule that reads the identity it names"
                )
            if lower.startswith("idem-"):
                raise ValueError(f"{name} is the proxy's own header; send Idem-Agent per tenant")
            if lower in seen:
                raise ValueError(f"header {name!r} is listed twice")
            seen.add(lower)
        return value
