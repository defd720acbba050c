"""docs/recovery.md's walk-through, played for real: a proxy killed while Slack holds the third
post of a batch, its successor's sweep, the agent's repeat answered `409 outcome-unknown`, and
then every `idemproxy` command of the page run as printed there, its output compared with the
page's (timestamps and the operator's host aside; table rows by their cells, so that added
columns do not break it). The page cannot drift from what the commands do.

One thing differs from the page on purpose: the route's lease is 1 s instead of 30 s and the
sweep runs every 0.5 s, so the test does not wait 35 s for the sweep to find the dead attempt.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from idemproxy.policies.loader import pack_text
from tests.support.controller import Controller
from tests.support.fakes.chat import CHAT, build_chat_app
from tests.support.fakes.service import Fault, Planned
from tests.support.fakes.serving import BackgroundServers
from tests.support.processes import REPO, ServedProxy, http_get, running

pytestmark = pytest.mark.e2e

DOC = REPO / "docs" / "recovery.md"
SECTION = "## A stuck batch, step by step"
AGENT, BATCH = "support-bot", "snowflake-42"
SECRET = "walk-through-controller-secret"
# The page's operator and host; the test runs as whoever runs it, on this host.
DOC_ACTOR = "alice@ops-laptop"
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ")
# The operator's shell: no IDEMPROXY_* setting of the test run leaks into the commands.
OPERATOR_ENVIRONMENT = {k: v for k, v in os.environ.items() if not k.startswith("IDEMPROXY_")}


@dataclass
class Step:
    """One `$ idemproxy ...` of the page and the output printed under it."""

    command: str
    expected: list[str]
    # What `$ echo $?` under it shows; None: 0, or 1 for a refusal (`idemproxy: ...`).
    exit_code: int | None = None


def walkthrough() -> str:
    text = DOC.read_text()
    start = text.index(SECTION)
    return text[start : text.index("\n## ", start + len(SECTION))]


def steps() -> list[Step]:
    found: list[Step] = []
    for block in re.findall(r"```console\n(.*?)```", walkthrough(), flags=re.DOTALL):
        lines = iter(block.splitlines())
        for line in lines:
            if line.startswith("$ "):
                command = line[2:]
                while command.endswith("\\"):
                    command = command[:-1] + next(lines).strip()
                if command == "echo $?":
                    found[-1].exit_code = int(next(lines))
                    continue
                found.append(Step(command, []))
            else:
                found[-1].expected.append(line)
    return found


def agent_answer_in_doc() -> dict[str, Any]:
    """The `http` block of the page: what the agent's repeat of the third post is answered."""
    (block,) = re.findall(r"```http\n(.*?)```", walkthrough(), flags=re.DOTALL)
    head, _, body = block.partition("\n\n")
    status_line, *header_lines = head.splitlines()
    headers = dict(line.split(": ", 1) for line in header_lines)
    return {"status": int(status_line.split()[1]), "headers": headers, "body": json.loads(body)}


def policy_with_a_short_lease(tmp_path: Path) -> Path:
    text = pack_text("slack")
    route = "  - name: chat_post_message\n"
    assert route in text
    path = tmp_path / "slack.yaml"
    path.write_text(text.replace(route, route + "    lease_ms: 1000\n"))
    return path


def post_message(proxy_url: str, tool_call: str) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"channel": "C024BE91L", "text": f"reply {tool_call}"}).encode()
    request = urllib.request.Request(
        f"{proxy_url}/slack/api/chat.postMessage",
        data=body,
        method="POST",
        headers={
            "Authorization": "Bearer xoxb-walkthrough",
            "Content-Type": "application/json",
            "Idem-Batch": BATCH,
            "Idem-Tool-Call": tool_call,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


def normalized(text: str) -> str:
    local_actor = f"{getpass.getuser()}@{socket.gethostname()}"
    return TIMESTAMP.sub("<when>", text.replace(DOC_ACTOR, local_actor))


def shown_in(expected_line: str, output: str) -> bool:
    """A plain line must appear as it is; a table row (cells two spaces apart) must have its
    cells, in order, on one line of the output."""
    line = normalized(expected_line).strip()
    actual_lines = [normalized(actual).strip() for actual in output.splitlines()]
    if "  " not in line:
        return line in actual_lines
    cells = re.split(r"\s{2,}", line)
    pattern = re.compile(r"\s+.*?".join(re.escape(cell) for cell in cells))
    return any(pattern.search(actual) for actual in actual_lines)


def run(step: Step, admin_url: str) -> tuple[int, str]:
    script = shutil.which("idemproxy", path=str(Path(sys.executable).parent))
    assert script is not None
    argv = shlex.split(step.command)
    assert argv[0] == "idemproxy", step.command
    done = subprocess.run(
        [script, *argv[1:]],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**OPERATOR_ENVIRONMENT, "IDEMPROXY_ADMIN_URL": admin_url},
    )
    return done.returncode, done.stdout + done.stderr


def test_the_walkthrough_runs_as_the_page_shows_it(tmp_path: Path) -> None:
    servers = BackgroundServers()
    servers.start()
    slack_app = build_chat_app()
    slack = slack_app[CHAT]
    slack_url = servers.serve(slack_app)
    controller = Controller(SECRET)
    servers.run(controller.start())
    store = f"sqlite:///{tmp_path}/store.db"

    def proxy() -> ServedProxy:
        return ServedProxy(
            tmp_path,
            "--upstream", f"slack={slack_url}/slack",
            "--policy", f"slack={policy_with_a_short_lease(tmp_path)}",
            "--store", store,
            "--agent-id", AGENT,
            env={
                "IDEMPROXY_RECOVERY__SWEEP_INTERVAL_S": "0.5",
                "IDEMPROXY_CONTROLLER__URL": controller.url,
                "IDEMPROXY_CONTROLLER__SECRET": SECRET,
            },
        )  # fmt: skip

    try:
        first = proxy()
        with running(first):
            assert post_message(first.url, "call-1")[0] == 200
            assert post_message(first.url, "call-2")[0] == 200
            # Slack holds the third post while the pod is killed, then posts it all the same.
            slack.plan("message", Planned(Fault.SLOW, delay_s=2.0))
            third = threading.Thread(target=_post_ignoring_errors, args=(first.url, "call-3"))
            third.start()
            deadline = time.monotonic() + 10
            while len(slack.seen) < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(slack.seen) == 3
            first.kill()
            third.join(timeout=30)

        replacement = proxy()
        with running(replacement):
            _wait_for_review(replacement.admin_url)
            # The gauge follows the store at the proxy's next refresh, not at the sweep itself.
            _wait_for("the unknown-outcomes gauge to show it", lambda: _unknown_gauge(replacement))
            _check_the_agents_repeat(replacement.url)
            _wait_for("Slack to post the held reply", lambda: len(slack.effects) == 3)
            # The page's status shows nothing waiting for the controller.
            _wait_for("the controller to hear of it", lambda: _unknown_tool_calls(controller))
            for step in steps():
                code, output = run(step, replacement.admin_url)
                refused = any(line.startswith("idemproxy: ") for line in step.expected)
                expected_code = step.exit_code if step.exit_code is not None else int(refused)
                assert code == expected_code, f"{step.command} exited {code}:\n{output}"
                missing = [
                    line
                    for line in step.expected
                    if line.strip() not in ("", "...") and not shown_in(line, output)
                ]
                assert not missing, f"$ {step.command}\n{output}\nnot shown: {missing}"
            # The re-run after recovery: every post of the batch is answered from the record.
            for call in ("call-1", "call-2", "call-3"):
                status, headers, _ = post_message(replacement.url, call)
                assert (status, headers["Idem-Outcome"]) == (200, "replayed")
        assert len(slack.effects) == 3
        assert _unknown_tool_calls(controller) == ["call-3"]
    finally:
        servers.run(controller.stop())
        servers.stop()


def _post_ignoring_errors(proxy_url: str, tool_call: str) -> None:
    # The proxy is killed under it, as the page tells.
    with contextlib.suppress(OSError):
        post_message(proxy_url, tool_call)


def _wait_for_review(admin_url: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        code, output = run(Step("idemproxy review list --json", []), admin_url)
        if code == 0 and json.loads(output):
            return
        time.sleep(0.2)
    raise AssertionError("the sweep never put the third post up for review")


def _wait_for(what: str, condition: Callable[[], object]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited 10 s for {what}")
        time.sleep(0.05)


def _unknown_gauge(proxy: ServedProxy) -> bool:
    _, metrics = http_get(proxy.admin_url + "/metrics")
    return bool(re.search(rb"(?m)^idemproxy_unknown_outcomes(\{[^}]*\})? 1\.0$", metrics))


def _unknown_tool_calls(controller: Controller) -> list[str]:
    events = controller.events(AGENT)
    return [str(event["tool_call"]) for event in events if event["type"] == "effect.unknown"]


def _check_the_agents_repeat(proxy_url: str) -> None:
    status, headers, body = post_message(proxy_url, "call-3")
    shown = agent_answer_in_doc()
    assert status == shown["status"] == 409
    for name, value in shown["headers"].items():
        assert headers.get(name) == value, (name, headers)
    answer = json.loads(body)
    for name, value in shown["body"].items():
        assert answer[name] == value, (name, answer)
