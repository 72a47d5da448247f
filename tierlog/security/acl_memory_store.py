"""An ``AclStore`` in memory: the ACLs of an authorizer with nowhere to keep them (unit
tests, benchmarks). Nothing survives the process; no other writer exists to follow."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tierlog.security.acl import ResourcePattern
from tierlog.security.api import Entries

__all__ = ["MemoryAclStore"]


class MemoryAclStore:
    def __init__(self) -> None:
        self._patterns: dict[ResourcePattern, Entries] = {}

    async def load(self) -> Mapping[ResourcePattern, Entries]:
        return dict(self._patterns)

    async def update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> Entries:
        entries = frozenset(change(self._patterns.get(pattern, frozenset())))
        if entries:
            self._patterns[pattern] = entries
        else:
            self._patterns.pop(pattern, None)
        return entries

    def follow(self, on_change: Callable[[ResourcePattern, Entries], None]) -> None:
        """Nothing to follow: this store has one writer."""

    async def close(self) -> None:
        """Nothing to release."""
