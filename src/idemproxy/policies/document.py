"""What every policy model shares: frozen, unknown keys refused (a typo in a policy file is an
error, not a silently ignored setting), and the error that points at a place in the document."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """The base of every policy model: immutable once loaded, no unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class LocatedError(ValueError):
    """A problem that spans fields, with the place in the document it is about."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc
