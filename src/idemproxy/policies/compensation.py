"""Compensations: how a route's completed effect is undone (a refund, a delete), declared as a
request template filled from the original request's path and its recorded response.

``idemproxy recover AGENT BATCH --strategy compensate`` sends them through the proxy, each as
an effect of its own; see docs/recovery.md.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from idemproxy.policies import placeholders
from idemproxy.policies.placeholders import Source

UNDO_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON_BODY_ALIAS = "json"


class Compensation(BaseModel):
    """``compensation:`` of a route: the request that undoes one of its effects."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    method: str
    # Below the upstream, like a route's match path; placeholders are percent-encoded.
    path: str
    json_body: Any = Field(default=None, alias=JSON_BODY_ALIAS)
    form: dict[str, str] | None = None

    @field_validator("method")
    @classmethod
    def _effectful(cls, value: str) -> str:
        method = value.upper()
        if method not in UNDO_METHODS:
            raise ValueError(
                f"a compensation changes something: use one of {sorted(UNDO_METHODS)}, not"
                f" {value!r}"
            )
        return method

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"compensation path {value!r} must start with '/'")
        placeholders.parse(value)
        return value

    @model_validator(mode="after")
    def _one_body(self) -> Compensation:
        if self.json_body is not None and self.form is not None:
            raise ValueError("give a compensation 'json' or 'form' body, not both")
        for text in self._templates()[1:]:
            placeholders.parse(text)
        return self

    def _templates(self) -> list[str]:
        return [self.path, *placeholders.templates_in(self.json_body or self.form or {})]

    def check_fits(self, path_params: frozenset[str], secret: frozenset[str] = frozenset()) -> None:
        """Refuse placeholders a recorded effect of the route can never fill: a request body,
        or a ``secret`` path parameter (a record keeps neither)."""
        for text in self._templates():
            for placeholder in placeholders.parse(text):
                if placeholder.source is Source.REQUEST:
                    raise ValueError(
                        f"compensation: {placeholder.text} cannot be filled, since a record"
                        " keeps no request body; take the value from {response./pointer}"
                        " or {path.NAME}"
                    )
                if placeholder.source is Source.PATH and placeholder.name in secret:
                    raise ValueError(
                        f"compensation: {placeholder.text} is a secret path parameter, which a"
                        " record never keeps; undo through a request the operator's"
                        " credentials authorize, filled from {response./pointer} or another"
                        " {path.NAME}"
                    )
            allowed = frozenset({Source.PATH, Source.RESPONSE})
            placeholders.check(text, path_params, allowed, "compensation")

    def describe(self) -> str:
        """``POST /v1/refunds``: the request as a plan shows it."""
        return f"{self.method} {self.path}"
