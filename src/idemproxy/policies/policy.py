"""A policy document: the routes of one upstream, tried in order, and the adapter that drives
the upstream's own dedupe. Quantities carry their unit in the field name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, ValidationError, model_validator

from idemproxy.policies.approval import ApprovalRule
from idemproxy.policies.document import Frozen, LocatedError
from idemproxy.policies.kinds import AdapterName
from idemproxy.policies.mcp import McpRules
from idemproxy.policies.route import Route
from idemproxy.policies.scope import Scope
from idemproxy.policies.templates import methods_cover, template_covers


@dataclass(frozen=True, slots=True)
class NativeWindow:
    """How long the upstream deduplicates a native key: the default we assume and the most it
    is known to keep. A re-send under the same key is only safe inside this window."""

    default_s: int
    max_s: int


# Stripe keeps idempotency keys at least 24 h; a default an hour short leaves room for clock
# skew. Discord checks an enforced nonce "in the past few minutes": we assume two and allow
# five. Bluesky needs no window: a record key is unique in the repository for good.
NATIVE_WINDOWS: dict[AdapterName, NativeWindow] = {
    AdapterName.STRIPE: NativeWindow(default_s=23 * 3600, max_s=24 * 3600),
    AdapterName.DISCORD: NativeWindow(default_s=120, max_s=300),
}


class Policy(Frozen):
    """The routes of one upstream, tried in order; ``default`` takes what none matches."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]*$", max_length=64)]
    description: str = ""
    adapter: AdapterName = AdapterName.NONE
    # How long the upstream deduplicates a native key; unset: the adapter's default.
    native_window_s: Annotated[int, Field(ge=1)] | None = None
    scope: Scope = Scope()
    # Set for an MCP server: its POSTs are classified by their JSON-RPC message (policies/mcp.py).
    mcp: McpRules | None = None
    routes: tuple[Route, ...] = ()
    default: Route

    @property
    def window_s(self) -> int | None:
        """The native dedupe window in force, or None where the adapter needs none."""
        window = NATIVE_WINDOWS.get(self.adapter)
        if window is None:
            return None
        return self.native_window_s or window.default_s

    @model_validator(mode="after")
    def _unique_names(self) -> Policy:
        seen: set[str] = set()
        for route in (*self.routes, self.default):
            if route.name in seen:
                raise ValueError(f"route name {route.name!r} is used twice; names must differ")
            seen.add(route.name)
        return self

    @model_validator(mode="after")
    def _possible_window(self) -> Policy:
        if self.native_window_s is None:
            return self
        window = NATIVE_WINDOWS.get(self.adapter)
        if window is None:
            raise LocatedError(
                ("native_window_s",),
                f"adapter {self.adapter!s} has no dedupe window to set; remove native_window_s",
            )
        if self.native_window_s > window.max_s:
            raise LocatedError(
                ("native_window_s",),
                f"{self.adapter!s} keeps a native key for at most {window.max_s} s, so a re-send"
                f" after {self.native_window_s} s could act twice; set at most {window.max_s}",
            )
        return self

    @model_validator(mode="after")
    def _native_keys_have_an_adapter(self) -> Policy:
        for index, route in self._indexed_routes():
            if not route.native_key:
                continue
            where = ("routes", index, "native_key") if index >= 0 else ("default", "native_key")
            if self.adapter is AdapterName.NONE:
                raise LocatedError(
                    where,
                    f"route {route.name!r} asks for a native key but the policy has no adapter;"
                    " set 'adapter: stripe', 'discord' or 'bluesky', or remove native_key",
                )
            if route.match.methods != ("POST",):
                raise LocatedError(
                    where,
                    f"route {route.name!r}: {self.adapter!s} native keys go on POST requests"
                    " only; match 'methods: [POST]' or remove native_key",
                )
        return self

    @model_validator(mode="after")
    def _mcp_has_no_adapter(self) -> Policy:
        if self.mcp is not None and self.adapter is not AdapterName.NONE:
            raise LocatedError(
                ("adapter",),
                f"an MCP server has no {self.adapter!s} dedupe key to drive: the mcp: section"
                " keys tool calls itself; remove the adapter or the mcp: section",
            )
        return self

    @model_validator(mode="after")
    def _every_route_reachable(self) -> Policy:
        for later, route in enumerate(self.routes):
            for earlier, before in enumerate(self.routes[:later]):
                if methods_cover(before.match.methods, route.match.methods) and template_covers(
                    before.match.path, route.match.path
                ):
                    raise LocatedError(
                        ("routes", later, "match"),
                        f"route {route.name!r} can never match: route {before.name!r} above it"
                        f" (routes.{earlier}) takes every {'/'.join(route.match.methods)}"
                        f" {route.match.path} request first; move {route.name!r} above it or"
                        f" narrow {before.name!r}",
                    )
        return self

    def with_approvals(self, approvals: Mapping[str, ApprovalRule]) -> Policy:
        """This policy with the approval rules of an upstream's settings put on the routes they
        name, so a shipped pack holds effects without being copied out."""
        names = {route.name for route in (*self.routes, self.default)}
        for name in approvals:
            if name not in names:
                raise ValueError(
                    f"approvals names route {name!r}, which policy {self.name!r} does not have"
                    f" (its routes: {', '.join(sorted(names))})"
                )
        if not approvals:
            return self
        data = self.model_dump(by_alias=True, exclude_unset=True)
        for route in (*data.get("routes", ()), data["default"]):
            name = route["name"]
            if name in approvals:
                route["approval"] = approvals[name]
                try:
                    Route.model_validate(route)
                except ValidationError as exc:
                    message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
                    raise ValueError(f"approvals.{name}: {message}") from None
        return Policy.model_validate(data)

    def _indexed_routes(self) -> list[tuple[int, Route]]:
        return [*enumerate(self.routes), (-1, self.default)]
