"""The console's sign-in: a signed session cookie, and the CSRF token of its forms.

The cookie carries a random session id and its own expiry, signed with HMAC-SHA256 under a key
derived from the admin token. Any worker, and the process after a restart, reads it without
server-side state; changing the admin token signs every session out. Signing out deletes the
cookie from the browser; a copy taken before stays valid until it expires (12 h), as a bearer
token would: rotate the admin token to end every session at once.

A session's CSRF token is an HMAC of its id under another key derived from the same token. A
page of another site cannot read it (the cookie is ``HttpOnly``, the console grants no CORS),
and its forms carry no cookie anyway (``SameSite=Strict``), so a form that carries the token
came from a console page.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from pydantic import SecretStr

COOKIE = "idemproxy_console"
COOKIE_PATH = "/console"
SESSION_S = 12 * 3600
CSRF_FIELD = "csrf"
_SESSION_KEY = b"idemproxy console session v1"
_CSRF_KEY = b"idemproxy console csrf v1"


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in browser: its random id, and when the sign-in ends (Unix seconds)."""

    sid: str
    expires_s: int


def _derive(token: bytes, purpose: bytes) -> bytes:
    return hmac.new(token, purpose, hashlib.sha256).digest()


def _mac(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _bytes(text: str) -> bytes:
    # A browser may send any character; surrogatepass keeps odd ones comparable, not fatal.
    return text.encode("utf-8", "surrogatepass")


class Sessions:
    """Sign-ins checked against the admin token, and the cookies and CSRF tokens they get."""

    def __init__(
        self,
        token: SecretStr,
        lifetime_s: int = SESSION_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        secret = _bytes(token.get_secret_value())
        self._token = secret
        self._session_key = _derive(secret, _SESSION_KEY)
        self._csrf_key = _derive(secret, _CSRF_KEY)
        self._lifetime_s = lifetime_s
        self._clock = clock

    def admits(self, token: str) -> bool:
        """The admin token, compared in constant time."""
        return hmac.compare_digest(_bytes(token), self._token)

    def issue(self) -> tuple[Session, str]:
        """A new session and the cookie value that carries it."""
        session = Session(secrets.token_urlsafe(18), int(self._clock()) + self._lifetime_s)
        signed = f"{session.sid}.{session.expires_s}"
        return session, f"{signed}.{_mac(self._session_key, signed)}"

    def read(self, cookie: str | None) -> Session | None:
        """The session a cookie carries; None unless it is ours, intact and unexpired."""
        if not cookie:
            return None
        signed, _, mac = cookie.rpartition(".")
        sid, _, expires = signed.partition(".")
        if not sid or not expires.isdigit():
            return None
        if not hmac.compare_digest(_bytes(mac), _mac(self._session_key, signed).encode()):
            return None
        session = Session(sid, int(expires))
        return session if session.expires_s > self._clock() else None

    def csrf(self, session: Session) -> str:
        """The token every form of this session carries."""
        return _mac(self._csrf_key, session.sid)

    def checks(self, session: Session, given: str) -> bool:
        """Whether a form's token is this session's, compared in constant time."""
        return hmac.compare_digest(_bytes(given), self.csrf(session).encode())

    def set_cookie(self, response: web.StreamResponse, cookie: str) -> None:
        response.set_cookie(
            COOKIE,
            cookie,
            path=COOKIE_PATH,
            max_age=self._lifetime_s,
            httponly=True,
            samesite="Strict",
        )


def clear_cookie(response: web.StreamResponse) -> None:
    """Sign the browser out: the cookie is replaced by an expired, empty one."""
    response.del_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="Strict")
