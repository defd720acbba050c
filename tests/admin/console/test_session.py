"""The signed session cookie and the CSRF token: only this proxy's, intact and unexpired
cookies sign in, and only a session's own token passes its forms."""

from __future__ import annotations

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from idemproxy.admin.console.session import COOKIE, SESSION_S, Sessions, clear_cookie

TOKEN = SecretStr("admin-token-0123456789")


class Clock:
    def __init__(self, now_s: float = 1_000_000.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


def test_a_cookie_it_issued_reads_back_as_its_session() -> None:
    sessions = Sessions(TOKEN, clock=Clock())
    session, cookie = sessions.issue()
    assert sessions.read(cookie) == session
    assert session.expires_s == 1_000_000 + SESSION_S
    assert TOKEN.get_secret_value() not in cookie
    assert sessions.issue()[0].sid != session.sid  # each sign-in is a session of its own


def test_a_cookie_lapses_at_its_expiry() -> None:
    clock = Clock()
    sessions = Sessions(TOKEN, lifetime_s=60, clock=clock)
    _, cookie = sessions.issue()
    clock.now_s += 59
    assert sessions.read(cookie) is not None
    clock.now_s += 1
    assert sessions.read(cookie) is None


def test_an_altered_cookie_signs_nobody_in() -> None:
    clock = Clock()
    sessions = Sessions(TOKEN, clock=clock)
    session, cookie = sessions.issue()
    sid, expires, mac = cookie.split(".")
    later = str(session.expires_s + 10 * SESSION_S)
    for forged in (
        f"{sid}.{later}.{mac}",  # a longer life
        f"other{sid}.{expires}.{mac}",  # another session's id
        f"{sid}.{expires}.{mac[:-1]}0" if mac[-1] != "0" else f"{sid}.{expires}.{mac[:-1]}1",
        f"{sid}.{expires}",
        "",
        "...",
        f"{sid}.-5.{mac}",
    ):
        assert sessions.read(forged) is None, forged
    assert sessions.read(None) is None


def test_another_admin_token_reads_none_of_the_cookies() -> None:
    """Rotating the admin token signs every session out."""
    _, cookie = Sessions(TOKEN).issue()
    assert Sessions(SecretStr("rotated-token-0123456789")).read(cookie) is None


@given(st.text(max_size=200))
def test_no_cookie_text_but_an_issued_one_reads_as_a_session(text: str) -> None:
    assert Sessions(TOKEN).read(text) is None


def test_the_admin_token_alone_is_admitted() -> None:
    sessions = Sessions(TOKEN)
    assert sessions.admits(TOKEN.get_secret_value())
    for wrong in ("", "admin-token", TOKEN.get_secret_value() + " ", "Bearer " + "x", "\udcff"):
        assert not sessions.admits(wrong)


def test_a_forms_csrf_token_is_its_sessions_own() -> None:
    sessions = Sessions(TOKEN)
    mine, cookie = sessions.issue()
    theirs, _ = sessions.issue()
    token = sessions.csrf(mine)
    assert sessions.checks(mine, token)
    assert not sessions.checks(theirs, token)
    assert not sessions.checks(mine, "")
    assert not sessions.checks(mine, token.upper())
    assert token not in cookie  # the cookie does not hand out the token
    assert Sessions(SecretStr("rotated-token-0123456789")).csrf(mine) != token


@pytest.mark.parametrize("clear", [False, True])
def test_the_cookie_is_http_only_same_site_strict_for_the_console_only(clear: bool) -> None:
    response = web.Response()
    sessions = Sessions(TOKEN)
    if clear:
        clear_cookie(response)
    else:
        sessions.set_cookie(response, sessions.issue()[1])
    morsel = response.cookies[COOKIE]
    assert morsel["httponly"] is True
    assert morsel["samesite"] == "Strict"
    assert morsel["path"] == "/console"
    assert morsel["max-age"] == ("0" if clear else str(SESSION_S))
    assert (morsel.value == "") is clear
