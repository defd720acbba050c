"""The closed sets a policy document names: effect classes, what a request without a key gets,
how many effects a tool call makes, the upstream adapters and the credential identity rules."""

from __future__ import annotations

from enum import StrEnum


class EffectClass(StrEnum):
    """safe: reads, forwarded as they come; external: done exactly once through the ledger;
    generation: LLM output, recorded and replayed, and retried when it failed."""

    SAFE = "safe"
    EXTERNAL = "external"
    GENERATION = "generation"


class OnMissingKey(StrEnum):
    """What an effect request without any key gets: refused, forwarded unprotected, or keyed by
    its content within ``content_window_s``."""

    REJECT = "reject"
    PASSTHROUGH = "passthrough"
    CONTENT = "content"


class ToolCallEffects(StrEnum):
    """How many effects one tool call makes on a route. ``one``: a request of the tool call
    without ``Idem-Step`` is keyed by the route, so a re-run the LLM worded anew cannot act a
    second time; ``many``: it is keyed by its request digest, so each distinct request acts."""

    ONE = "one"
    MANY = "many"


class AdapterName(StrEnum):
    """The upstream's own dedupe mechanism an adapter drives (SPEC section 5)."""

    NONE = "none"
    STRIPE = "stripe"
    DISCORD = "discord"
    BLUESKY = "bluesky"


class CredentialIdentity(StrEnum):
    """Which identity a request's ``Authorization`` credential names, read so that a rotated
    credential of the same identity keeps its records: ``none`` (the credential tells no
    identity apart), ``stripe_mode`` (test or live, from the key's prefix), ``jwt_subject``
    (the ``sub`` claim of a JWT, e.g. a Bluesky DID), ``discord_bot`` (the bot's user id, the
    first segment of a bot token)."""

    NONE = "none"
    STRIPE_MODE = "stripe_mode"
    JWT_SUBJECT = "jwt_subject"
    DISCORD_BOT = "discord_bot"


# The MCP spec's tool names: 1-128 of these characters (2025-11-25, "Tool names").
TOOL_NAME = r"^[A-Za-z0-9_.\-/]{1,128}$"
