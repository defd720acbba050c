"""The console's HTML: Jinja2 templates (package data, autoescaped) and the headers every page
carries.

Everything a page shows comes from the store, and much of it from the agent (batch and tool
call ids, paths, the summaries of held requests): autoescaping makes each of them text, never
markup, without a call to remember at every place it appears. The Content-Security-Policy lets a
page load nothing but the console's own stylesheet, run no script at all, post forms only to
the console and be framed by no one.
"""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import quote

import jinja2
from aiohttp import web

from idemproxy.admin.console.session import CSRF_FIELD, Session

PREFIX = "/console"
SESSION = web.RequestKey("console_session", Session)
CSRF_TOKEN = web.RequestKey("console_csrf", str)

POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self';"
    " frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # Pages show records and held payloads: no cache keeps them after sign-out.
    "Cache-Control": "no-store",
}


def segment(text: object) -> str:
    """One path segment: agent ids and effect keys may hold ``/``, sent as ``%2F``."""
    return quote(str(text), safe="")


def when(ms: object) -> str:
    """A store time (Unix ms) as UTC, to the second; 0 (never) as a dash."""
    if not isinstance(ms, int) or ms <= 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("idemproxy.admin.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["segment"] = segment
    environment.filters["when"] = when
    environment.globals.update(prefix=PREFIX, csrf_field=CSRF_FIELD)
    return environment


TEMPLATES = _environment()


def page(request: web.Request, template: str, code: int = 200, **context: Any) -> web.Response:
    """A console page, with the session's CSRF token for its forms (``None`` signed out)."""
    html = TEMPLATES.get_template(template).render(
        csrf=request.get(CSRF_TOKEN), signed_in=SESSION in request, **context
    )
    return web.Response(
        text=html, status=code, content_type="text/html", charset="utf-8", headers=PAGE_HEADERS
    )


def message(request: web.Request, code: int, title: str, detail: str) -> web.Response:
    """A page that only says why nothing else is shown (``code``: its HTTP status)."""
    return page(request, "message.html", code, title=title, detail=detail)


def see_other(location: str) -> web.Response:
    """After a form: the browser loads ``location`` with a GET (a reload sends nothing twice)."""
    return web.Response(status=303, headers={"Location": location, **PAGE_HEADERS})
