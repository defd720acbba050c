"""Each service's official SDK, pointed at `idemproxy serve`, in front of a fake of the service.

One proxy process (SQLite store) serves every upstream under its shipped pack, picked by name;
the fakes run in a background thread so the synchronous SDKs can call through the proxy from
the test. Tests tell their effects apart by a unique run id in the content they send.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fakes.chat import CHAT, ChatService, build_chat_app
from tests.support.fakes.discord import DISCORD, DiscordService, build_discord_app
from tests.support.fakes.pds import PDS, PdsService, build_pds_app
from tests.support.fakes.serving import BackgroundServers
from tests.support.fakes.stripe import STRIPE, StripeService, build_stripe_app
from tests.support.processes import ServedProxy, running

# The window of the `discord-brief` upstream: long enough for one re-send, short to outlast.
BRIEF_WINDOW_S = 1
BRIEF_POLICY = f"""
name: discord-brief
adapter: discord
native_window_s: {BRIEF_WINDOW_S}
routes:
  - name: create_message
    match: {{methods: [POST], path: "/{{version}}/channels/{{channel_id}}/messages"}}
    native_key: true
    volatile_fields: [/nonce, /payload_json/nonce]
default: {{name: other, effect: safe}}
"""


@dataclass
class Fakes:
    stripe: StripeService
    discord: DiscordService
    pds: PdsService
    slack: ChatService
    openai: ChatService
    anthropic: ChatService
    urls: dict[str, str]


@pytest.fixture(scope="session")
def fakes() -> Iterator[Fakes]:
    servers = BackgroundServers()
    servers.start()
    try:
        apps = {
            "stripe": build_stripe_app(),
            "discord": build_discord_app(),
            "bluesky": build_pds_app(),
            "slack": build_chat_app(),
            "openai": build_chat_app(),
            "anthropic": build_chat_app(),
        }
        urls = {name: servers.serve(app) for name, app in apps.items()}
        apps["bluesky"][PDS].url = urls["bluesky"]
        yield Fakes(
            stripe=apps["stripe"][STRIPE],
            discord=apps["discord"][DISCORD],
            pds=apps["bluesky"][PDS],
            slack=apps["slack"][CHAT],
            openai=apps["openai"][CHAT],
            anthropic=apps["anthropic"][CHAT],
            urls=urls,
        )
    finally:
        servers.stop()


def upstream_urls(fakes: Fakes) -> dict[str, str]:
    """Each upstream's base URL as a user would configure it (the real API's layout)."""
    urls = fakes.urls
    return {
        "stripe": urls["stripe"],
        "discord": urls["discord"] + "/api",
        "discord-brief": urls["discord"] + "/api",
        "bluesky": urls["bluesky"],
        "slack": urls["slack"] + "/slack",
        "openai": urls["openai"] + "/openai",
        "anthropic": urls["anthropic"] + "/anthropic",
    }


def write_config(directory: Path, fakes: Fakes, store: str) -> Path:
    policy = directory / "discord-brief.yaml"
    policy.write_text(BRIEF_POLICY)
    lines = ["agent_id: sdk-tests", f"store: {store}", "upstreams:"]
    for name, url in upstream_urls(fakes).items():
        lines.append(f"  {name}:")
        lines.append(f"    url: {url}")
        if name == "discord-brief":
            lines.append(f"    policy: {policy}")
    config = directory / "idemproxy.yaml"
    config.write_text("\n".join(lines) + "\n")
    return config


@pytest.fixture(scope="session")
def proxy(fakes: Fakes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedProxy]:
    directory = tmp_path_factory.mktemp("sdk-proxy")
    config = write_config(directory, fakes, f"sqlite:///{directory}/store.db")
    served = ServedProxy(directory, "--config", str(config))
    with running(served):
        yield served


@pytest.fixture
def run_id() -> str:
    """Unique per test: content and channels carry it, so effects are counted per test."""
    return uuid.uuid4().hex[:12]


def tool_call(run_id: str, call: str = "call-1") -> dict[str, str]:
    """The headers an agent's SDK wrapper sets for one tool call of one batch."""
    return {"Idem-Batch": f"batch-{run_id}", "Idem-Tool-Call": call}
