"""Route matching by method and path template, compiled once per policy."""

from __future__ import annotations

import re
from dataclasses import dataclass

from idemproxy.policies.policy import Policy
from idemproxy.policies.route import Route
from idemproxy.policies.templates import compile_template


@dataclass(frozen=True, slots=True)
class _CompiledRoute:
    route: Route
    methods: frozenset[str]
    pattern: re.Pattern[str]

    @classmethod
    def of(cls, route: Route) -> _CompiledRoute:
        return cls(route, frozenset(route.match.methods), compile_template(route.match.path))

    def matches(self, method: str, path: str) -> bool:
        if "*" not in self.methods and method not in self.methods:
            return False
        return self.pattern.fullmatch(path) is not None


class RouteMatcher:
    """First matching route wins; the policy's default takes everything else."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._routes = tuple(_CompiledRoute.of(route) for route in policy.routes)

    def match(self, method: str, path: str) -> Route:
        for compiled in self._routes:
            if compiled.matches(method, path):
                return compiled.route
        return self.policy.default
