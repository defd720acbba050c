"""The operator console in a real browser: Debian's Chromium, driven by Playwright, signs in to
`idemproxy serve` and approves, denies, resolves and resumes what an agent's calls left waiting,
while the agent's repeats show that each decision took effect exactly as the console said; a
page of another site the signed-in operator visits, and a DNS-rebound name, change nothing.

The proxy, on a SQLite store, serves a Stripe fake whose ``create_charge`` route holds charges
above 100.00 for approval, and a generic fake upstream whose ``/hang`` never answers (its
effect turns unknown).
Every step leaves a screenshot in ``test-output/console/`` (``$IDEMPROXY_TEST_OUTPUT/console``
when set), and a page that breaks its Content-Security-Policy fails the test.

Needs Debian's ``chromium`` and the ``playwright`` package (scripts/install-browser.sh).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from tests.support.browser import chromium
from tests.support.fakes.serving import BackgroundServers
from tests.support.fakes.stripe import STRIPE, StripeService, build_stripe_app
from tests.support.processes import REPO, FakeUpstream, ServedProxy, running

pytestmark = pytest.mark.e2e

TOKEN = "console-admin-token-0123456789"
STRIPE_KEY = "sk_test_console_0123"
AGENT = "billing-bot"
TIMEOUT_MS = 15_000
OUTPUT = Path(os.environ.get("IDEMPROXY_TEST_OUTPUT") or REPO / "test-output") / "console"


REBOUND = "rebind.test"  # an attacker's name, which the browser resolves to 127.0.0.1


@dataclass
class Stack:
    proxy: ServedProxy
    stripe: StripeService
    upstream: FakeUpstream
    browser: Any  # playwright's Browser
    servers: BackgroundServers


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("console")
    servers = BackgroundServers()
    servers.start()
    app = build_stripe_app()
    stripe_url = servers.serve(app)
    upstream = FakeUpstream(directory)
    config = directory / "idemproxy.yaml"
    config.write_text(
        f"agent_id: {AGENT}\n"
        f"store: sqlite:///{directory / 'store.db'}\n"
        "upstreams:\n"
        "  stripe:\n"
        f"    url: {stripe_url}\n"
        "    approvals:\n"
        "      create_charge: {when: [{field: /amount, above: 10000}]}\n"
        f"  up: {{url: '{upstream.url}/api', read_timeout_s: 1}}\n"
    )
    env = {"IDEMPROXY_ADMIN_TOKEN": TOKEN}
    proxy = ServedProxy(directory, "--config", str(config), env=env)
    executable = chromium()
    from playwright.sync_api import sync_playwright

    try:
        with running(upstream, proxy), sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=executable,
                args=[f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"],
            )
            try:
                yield Stack(proxy, app[STRIPE], upstream, browser, servers)
            finally:
                browser.close()
    finally:
        servers.stop()


class Console:
    """One operator's browser tab on the console, failing on any page error or CSP breach."""

    def __init__(self, stack: Stack, test: str) -> None:
        self.url = f"{stack.proxy.admin_url}/console"
        self.context = stack.browser.new_context()
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.errors: list[str] = []
        self.page.on("console", self._logged)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self._test = test
        self._shots = 0

    def _logged(self, message: Any) -> None:
        # Refusals the test asks for (a wrong token's 401) are logged as errors too; a CSP
        # breach says "Refused to ... Content Security Policy".
        if message.type == "error" and "Content Security Policy" in message.text:
            self.errors.append(message.text)

    def shot(self, step: str) -> Path:
        self._shots += 1
        OUTPUT.mkdir(parents=True, exist_ok=True)
        path = OUTPUT / f"{self._test}-{self._shots:02d}-{step}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def sign_in(self) -> None:
        self.page.goto(f"{self.url}/")
        assert self.page.url == f"{self.url}/signin"  # no session: sent to sign in
        self.page.fill("#token", TOKEN)
        self.page.click("button[type=submit]")
        assert self.page.locator("h1").inner_text() == "Overview"

    def text(self, selector: str) -> str:
        text: str = self.page.locator(selector).inner_text()
        return text

    def close(self) -> None:
        self.context.close()
        assert self.errors == [], self.errors


@pytest.fixture
def console(stack: Stack, request: pytest.FixtureRequest) -> Iterator[Console]:
    tab = Console(stack, request.node.name.removeprefix("test_").replace("_", "-"))
    try:
        yield tab
    finally:
        tab.close()


def charge(proxy: ServedProxy, call: str) -> httpx.Response:
    """The agent's tool charging 250.00, as a form, under its batch and tool call."""
    return httpx.post(
        f"{proxy.url}/stripe/v1/charges",
        content=b"amount=25000&currency=usd",
        headers={
            "Authorization": f"Bearer {STRIPE_KEY}",
            "Content-Type": "application/x-www-form-urlencoded",
            "Idem-Batch": "invoices-7",
            "Idem-Tool-Call": call,
        },
        timeout=10,
    )


def problem_type(response: httpx.Response) -> str:
    kind: str = response.json()["type"]
    return kind.rsplit("/", 1)[1]


def test_sign_in_refuses_a_wrong_token_and_admits_the_admin_token(
    stack: Stack, console: Console
) -> None:
    page = console.page
    page.goto(f"{console.url}/")
    console.shot("signin")
    page.fill("#token", "not-the-token")
    page.click("button[type=submit]")
    assert "not this proxy's admin token" in console.text(".error")
    console.shot("wrong-token")
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    assert console.text("h1") == "Overview"
    assert console.text(".done") == "Signed in."
    console.shot("overview")
    # The cookie is the browser's alone: HttpOnly, SameSite=Strict, for /console only.
    [cookie] = console.context.cookies()
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/console")
    assert TOKEN not in cookie["value"]
    page.click("text=Sign out")
    assert page.url == f"{console.url}/signin"
    page.goto(f"{console.url}/")
    assert page.url == f"{console.url}/signin"


def test_a_held_charge_approved_in_the_browser_is_charged_once(
    stack: Stack, console: Console
) -> None:
    held = charge(stack.proxy, "approve-me")
    assert problem_type(held) == "approval-required", held.text
    approval_id = held.json()["approval"]["id"]
    assert stack.stripe.charges == {}

    console.sign_in()
    assert "/amount above 10000" in console.text("#approvals")
    console.shot("overview-held")
    console.page.click(f"#approvals a[href$='/{approval_id}']")
    summary = console.text("#summary")
    assert "25000" in summary
    assert STRIPE_KEY not in summary  # the summary's secrets were redacted when it was held
    assert console.text("#state") == "awaiting_approval"
    console.shot("approval")
    console.page.fill("#approve-note", "invoice 7 checked")
    console.page.click("button.approve")
    assert console.text("#state") == "approved"
    assert console.text(".done").startswith("Approved")
    console.shot("approved")

    paid = charge(stack.proxy, "approve-me")
    again = charge(stack.proxy, "approve-me")
    assert paid.status_code == 200, paid.text
    assert again.json()["id"] == paid.json()["id"]
    assert [made["amount"] for made in stack.stripe.charges.values()] == [25_000]
    console.page.reload()
    assert console.text("#state") == "used"
    console.shot("used")


def test_a_charge_denied_in_the_browser_is_refused_with_the_note(
    stack: Stack, console: Console
) -> None:
    held = charge(stack.proxy, "deny-me")
    approval_id = held.json()["approval"]["id"]
    before = len(stack.stripe.charges)

    console.sign_in()
    console.page.click(f"#approvals a[href$='/{approval_id}']")
    console.page.fill("#deny-note", "customer asked us to stop")
    console.shot("deny-note")
    console.page.click("button.deny")
    assert console.text("#state") == "denied"
    console.shot("denied")

    repeat = charge(stack.proxy, "deny-me")
    assert repeat.status_code == 403
    assert problem_type(repeat) == "approval-denied"
    assert repeat.json()["note"] == "customer asked us to stop"
    assert len(stack.stripe.charges) == before


def test_an_unknown_outcome_resolved_in_the_browser_is_never_sent_again(
    stack: Stack, console: Console
) -> None:
    headers = {"Idem-Agent": "review-bot", "Idem-Batch": "sync-3", "Idem-Tool-Call": "c1"}
    hung = httpx.post(f"{stack.proxy.url}/up/hang", headers=headers, timeout=10)
    assert hung.status_code == 504
    key = hung.headers["Idem-Key"]

    console.sign_in()
    console.page.click(f"#review a[href$='{key.rpartition('/')[2].replace(':', '%3A')}']")
    assert console.text("#state") == "unknown"
    console.shot("unknown")
    console.page.fill("#applied-note", "the upstream's log shows it")
    console.page.click("text=Applied: it happened")
    assert console.text("#state") == "completed"
    console.shot("resolved")

    repeat = httpx.post(f"{stack.proxy.url}/up/hang", headers=headers, timeout=10)
    assert repeat.status_code < 500, repeat.text
    assert len(stack.upstream.effects("/hang")) == 1
    console.page.click("text=review-bot")
    assert "the upstream's log shows it" in console.text("#audit")
    console.shot("audit")


def test_a_paused_agent_resumed_in_the_browser_goes_ahead(stack: Stack, console: Console) -> None:
    agent = {"Idem-Agent": "paused-bot", "Idem-Batch": "b1"}
    sent = httpx.post(f"{stack.proxy.url}/up/messages", headers={**agent, "Idem-Tool-Call": "c1"})
    assert sent.status_code == 200
    paused = httpx.post(
        f"{stack.proxy.admin_url}/v1/agents/paused-bot/pause",
        json={"actor": "ops", "note": "rotating keys"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert paused.status_code == 200, paused.text
    refused = httpx.post(
        f"{stack.proxy.url}/up/messages", headers={**agent, "Idem-Tool-Call": "c2"}
    )
    assert problem_type(refused) == "agent-paused"

    console.sign_in()
    assert "paused" in console.text("#attention")
    console.shot("paused-overview")
    console.page.click("#attention >> text=paused-bot")
    assert console.text("#state") == "paused"
    console.shot("paused")
    console.page.fill("#resume-note", "keys rotated")
    console.page.click("button:text-is('Resume')")
    assert console.text("#state") == "running"
    assert "console (127.0.0.1)" in console.text("#audit")
    console.shot("resumed")

    going = httpx.post(f"{stack.proxy.url}/up/messages", headers={**agent, "Idem-Tool-Call": "c2"})
    assert going.status_code == 200, going.text


def test_a_failed_effect_retried_and_its_batch_recovered_in_the_browser_are_sent_again(
    stack: Stack, console: Console
) -> None:
    headers = {"Idem-Agent": "retry-bot", "Idem-Batch": "nightly-2", "Idem-Tool-Call": "c1"}

    def send() -> int:
        return httpx.post(f"{stack.proxy.url}/up/status/422", headers=headers).status_code

    assert send() == 422
    assert send() == 422  # replayed: a refusal (4xx) is an answer like any other
    assert len(stack.upstream.effects("/status/422")) == 1

    console.sign_in()
    console.page.click("#attention >> text=retry-bot")
    console.page.click("a:text-is('nightly-2')")
    assert "Failed (1)" in console.text("main")
    console.shot("batch-failed")
    console.page.click("text=POST /up/status/422")
    console.page.fill("#retry-note", "upstream fixed")
    console.page.click("button:text-is('Retry')")
    assert console.text("#state") == "not_applied"
    console.shot("retried")
    assert send() == 422
    assert len(stack.upstream.effects("/status/422")) == 2  # sent again, once

    console.page.click("a:text-is('nightly-2')")
    console.page.select_option("#strategy", "restart")
    console.page.fill("#recover-note", "re-run it all")
    console.page.click("button:text-is('Recover')")
    console.shot("recovered")
    assert console.text(".done").startswith("Recovered"), console.text("main")
    assert send() == 422
    assert len(stack.upstream.effects("/status/422")) == 3


# A page of another site that the signed-in operator visits: it posts the console's pause form
# (with a guessed CSRF token) into a hidden frame, and says when the frame answered.
ATTACK_PAGE = """<!doctype html>
<html><body>
<iframe name="sink" id="sink"></iframe>
<form id="forged" method="POST" target="sink" action="%(action)s">
  <input name="note" value="forged"><input name="csrf" value="0000">
</form>
<script>
document.getElementById("sink").onload = () => console.log("forged form answered");
document.getElementById("forged").submit();
</script>
</body></html>
"""


def test_a_page_of_another_site_cannot_act_through_a_signed_in_console(
    stack: Stack, console: Console
) -> None:
    agent = {"Idem-Agent": "victim-bot", "Idem-Batch": "b1", "Idem-Tool-Call": "c1"}
    assert httpx.post(f"{stack.proxy.url}/up/messages", headers=agent).status_code == 200
    console.sign_in()
    action = f"{console.url}/agents/victim-bot/pause"
    page_html = ATTACK_PAGE % {"action": action}

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page_html, content_type="text/html")

    attacker = web.Application()
    attacker.router.add_get("/", index)
    attack_url = stack.servers.serve(attacker)
    answers: list[int] = []
    console.page.on("response", lambda r: answers.append(r.status) if r.url == action else None)
    with console.page.expect_console_message(lambda m: m.text == "forged form answered"):
        console.page.goto(attack_url)
    assert answers == [403]
    # Nor may the page show the console's answer in its frame: frame-ancestors 'none'.
    framed = [error for error in console.errors if "frame-ancestors 'none'" in error]
    assert len(framed) == 1
    console.errors.remove(framed[0])

    # DNS rebinding: under the attacker's name the console is the page's own origin, but it
    # answers to its own names only (and the cookie is not sent to that name).
    rebound = console.page.goto(f"http://{REBOUND}:{stack.proxy.admin_port}/console/")
    assert rebound is not None
    assert rebound.status == 403
    assert "Unknown host name" in console.text("h1")
    console.shot("rebound")

    state = httpx.get(
        f"{stack.proxy.admin_url}/v1/agents/victim-bot",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ).json()
    assert state["state"] == "running"
    audit = httpx.get(
        f"{stack.proxy.admin_url}/v1/agents/victim-bot/audit",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ).json()
    assert audit["entries"] == []
