"""Frozen specs hashed once: plans, models and clusters key every cost cache, and a dataclass's generated hash
walks every field (a cluster's GPU and tiers too) on each lookup."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T", bound=type)


def cache_hash(cls: T) -> T:
    """Class decorator, above ``@dataclass(frozen=True)``: its generated hash, computed once per instance and kept
    beside the fields (not pickled or copied: another process hashes strings differently)."""
    field_hash: Callable[[Any], int] = cls.__hash__

    def __hash__(self: Any) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = field_hash(self)
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self: Any) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


    cls.__hash__ = __hash__
    cls.__getstate__ = __getstate__
    return cls
