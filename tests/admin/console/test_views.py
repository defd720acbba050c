"""Pages: autoescaped values, the headers every page carries, and the filters templates use."""

from __future__ import annotations

from aiohttp.test_utils import make_mocked_request

from idemproxy.admin.console.views import PAGE_HEADERS, message, page, see_other, segment, when


def test_a_value_from_the_agent_is_text_on_the_page_never_markup() -> None:
    hostile = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    response = message(make_mocked_request("GET", "/console/"), 409, hostile, hostile)
    assert response.text is not None
    assert "<script>" not in response.text
    assert "<img" not in response.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text
    assert response.status == 409


def test_every_page_forbids_scripts_framing_and_foreign_forms() -> None:
    response = page(make_mocked_request("GET", "/console/signin"), "signin.html", error="")
    policy = response.headers["Content-Security-Policy"]
    for directive in ("default-src 'none'", "form-action 'self'", "frame-ancestors 'none'"):
        assert directive in policy
    assert "script-src" not in policy  # default-src 'none' runs no script at all
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.content_type == "text/html"


def test_signed_out_pages_carry_no_sign_out_form() -> None:
    response = page(make_mocked_request("GET", "/console/signin"), "signin.html", error="")
    assert response.text is not None
    assert "/console/signout" not in response.text
    assert 'name="token"' in response.text


def test_a_redirect_after_a_form_is_see_other_with_the_page_headers() -> None:
    response = see_other("/console/agents/a%2Fb")
    assert (response.status, response.headers["Location"]) == (303, "/console/agents/a%2Fb")
    assert set(PAGE_HEADERS) <= set(response.headers)


def test_ids_with_slashes_are_one_path_segment() -> None:
    assert segment("team/bot") == "team%2Fbot"
    assert segment("bot/tc:b1:c1:d-0") == "bot%2Ftc%3Ab1%3Ac1%3Ad-0"


def test_store_times_read_as_utc_and_never_as_a_dash() -> None:
    assert when(1_700_000_000_000) == "2023-11-14 22:13:20 UTC"
    assert when(0) == "-"
    assert when("soon") == "-"
