"""A real browser on the proxy's host visits a hostile page: nothing it sends through the
admin API changes anything, and nothing it reads there gets back to the page.

``idemproxy serve`` runs without an admin token (loopback, the way a developer runs it) and
holds an effect awaiting review. Chromium, driven by Playwright, loads a page served on another
loopback port that forges the calls an attacker wants: pause the agent and resolve the review
item as not applied (which would free the key and let the effect be sent twice), as no-cors
fetches, HTML form posts and a CORS fetch of JSON. Then it plays DNS rebinding: the browser
resolves a name of the attacker's to 127.0.0.1 and reads the admin API under that name, which
to the browser is the page's own origin. The store is then read directly: no pause, the item
still unknown, no audit entry.

Needs Debian's ``chromium`` and the ``playwright`` package (scripts/install-browser.sh).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from aiohttp import web

from idemproxy.store.factory import open_store
from idemproxy.store.records import RecordKey, RecordState
from tests.support.browser import chromium
from tests.support.fakes.serving import BackgroundServers
from tests.support.processes import FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e


AGENT, BATCH = "browser-bot", "batch-77"
REBOUND = "rebind.test"  # the attacker's name, which the browser resolves to 127.0.0.1
TIMEOUT_MS = 15_000

# Every forgery the page tries; each ends in the browser's console as one line, so the test
# knows the browser sent it (or failed to) before it looks at the store.
ATTACK_PAGE = """<!doctype html>
<html><body>
<iframe name="sink" id="sink"></iframe>
<script>
const admin = %(admin)s, pause = %(pause)s, resolution = %(resolution)s;
const verdict = JSON.stringify({as: "not_applied", actor: "mallory", note: "forged"});

function submitted(action, enctype, field, value) {
  return new Promise((resolve) => {
    const sink = document.getElementById("sink");
    sink.onload = () => resolve("loaded");
    const form = document.createElement("form");
    form.method = "POST";
    form.action = action;
    form.enctype = enctype;
    form.target = "sink";
    const input = document.createElement("input");
    input.name = field;
    input.value = value;
    form.appendChild(input);
    document.body.appendChild(form);
    form.submit();
  });
}

async function attack() {
  const outcomes = {};
  const plain = {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}};
  outcomes.fetch_pause = await fetch(admin + pause, {...plain, body: '{"actor": "mallory"}'})
    .then((r) => r.type, (e) => "error: " + e);
  outcomes.fetch_resolve = await fetch(admin + resolution, {...plain, body: verdict})
    .then((r) => r.type, (e) => "error: " + e);
  outcomes.cors_json = await fetch(admin + resolution, {
    method: "POST", mode: "cors", headers: {"Content-Type": "application/json"}, body: verdict,
  }).then((r) => "status " + r.status, (e) => "blocked");
  // A text/plain form makes a JSON-looking body out of one field: name={"as":..., value="}.
  outcomes.form_resolve = await submitted(
    admin + resolution, "text/plain",
    '{"as": "not_applied", "actor": "mallory", "note": "', '"}');
  outcomes.form_pause = await submitted(
    admin + pause, "application/x-www-form-urlencoded", "actor", "mallory");
  console.log("attacked " + JSON.stringify(outcomes));
}
attack();
</script>
</body></html>
"""


def attack_app(admin_url: str, key: str) -> web.Application:
    """The hostile page, on its own loopback port."""
    paths = {
        "admin": admin_url,
        "pause": f"/v1/agents/{AGENT}/pause",
        "resolution": f"/v1/review/{quote(key, safe='')}/resolution",
    }
    page = ATTACK_PAGE % {name: json.dumps(value) for name, value in paths.items()}

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", index)
    return app


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServedProxy, str]]:
    upstream = FakeUpstream(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(f"upstreams:\n  up: {{url: '{upstream.url}/api', read_timeout_s: 1}}\n")
    store_url = f"sqlite:///{tmp_path / 'effects.db'}"
    proxy = ServedProxy(tmp_path, "--config", str(config), "--store", store_url)
    with running(upstream, proxy):
        yield proxy, store_url


async def effect_awaiting_review(proxy: ServedProxy) -> str:
    """One completed effect, and one the upstream never answered: unknown, in review."""
    headers = {"Idem-Agent": AGENT, "Idem-Batch": BATCH}
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{proxy.url}/up/messages", headers={**headers, "Idem-Tool-Call": "c1"}
        ) as done:
            assert done.status == 200
        async with session.post(
            f"{proxy.url}/up/hang", headers={**headers, "Idem-Tool-Call": "c2"}
        ) as hung:
            assert hung.status == 504
            return hung.headers["Idem-Key"]


async def store_state(store_url: str, key: str) -> tuple[Any, RecordState | None, int]:
    """What the store holds, read directly: the agent's pause, the item's state, the audit."""
    store = open_store(store_url)
    try:
        agent, _, effect = key.partition("/")
        record = await store.get(RecordKey(agent, effect))
        control = await store.read_control(AGENT)
        audit = await store.read_audit(AGENT)
        return control.pause, record.state if record else None, len(audit)
    finally:
        await store.close()


def test_a_hostile_page_changes_nothing_and_reads_nothing(
    served: tuple[ServedProxy, str],
) -> None:
    proxy, store_url = served
    key = asyncio.run(effect_awaiting_review(proxy))
    admin_port = proxy.admin_port
    servers = BackgroundServers()
    servers.start()
    try:
        page_url = servers.serve(attack_app(proxy.admin_url, key))
        assert page_url.rsplit(":", 1)[1] != str(admin_port)
        executable = chromium()
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=executable,
                args=[f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"],
            )
            try:
                page = browser.new_page()
                answers: list[tuple[str, int]] = []  # what the admin listener answered

                def answered(response: Any) -> None:
                    if response.url.startswith(proxy.admin_url):
                        answers.append((response.request.method, response.status))

                page.on("response", answered)
                with page.expect_console_message(
                    lambda m: m.text.startswith("attacked "), timeout=TIMEOUT_MS
                ) as attacked:
                    page.goto(page_url)
                outcomes = json.loads(attacked.value.text.removeprefix("attacked "))

                # DNS rebinding: the attacker's name now points at the admin listener, so the
                # page's origin and the API's are one and the same to the browser.
                rebound = f"http://{REBOUND}:{admin_port}"
                navigation = page.goto(f"{rebound}/v1/review")
                assert navigation is not None
                shown = page.content()
                read = page.evaluate(
                    "fetch('/v1/review').then(async (r) => [r.status, await r.text()])"
                )
                written = page.evaluate(
                    """(path) => fetch(path, {method: "POST",
                         headers: {"Content-Type": "application/json"},
                         body: JSON.stringify({as: "not_applied", actor: "mallory"})})
                       .then((r) => r.status)""",
                    f"/v1/review/{quote(key, safe='')}/resolution",
                )
            finally:
                browser.close()
    finally:
        servers.stop()

    # Every forged write reached the admin listener and was refused there.
    assert outcomes["fetch_pause"] == "opaque"
    assert outcomes["fetch_resolve"] == "opaque"
    assert outcomes["cors_json"] == "blocked"  # the preflight got no CORS permission
    assert (outcomes["form_resolve"], outcomes["form_pause"]) == ("loaded", "loaded")
    posts = [status for method, status in answers if method == "POST"]
    assert posts == [403, 403, 403, 403], answers
    # What the rebound page got: refusals, not the review queue.
    assert navigation.status == 403
    assert key not in shown
    assert read[0] == 403
    assert key not in read[1]
    assert BATCH not in read[1]
    assert written == 403

    pause, state, audited = asyncio.run(store_state(store_url, key))
    assert pause is None
    assert state is RecordState.UNKNOWN
    assert audited == 0
