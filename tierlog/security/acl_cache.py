"""The in-memory ACL index the authorizer decides from: every pattern's entries, looked up
without scanning.

- LITERAL patterns: a dict keyed by (resource type, name); the wildcard ``*`` is one key.
- PREFIXED patterns: per resource type a dict prefix -> entries, plus the set of prefix
  lengths present; the prefixes of a name that can match are ``name[:n]`` for those
  lengths only. A lookup therefore costs one dict probe per distinct prefix length (a
  handful in practice), whatever the number of ACLs: 10,000 ACLs decide as fast as 10
  (``bench/acl_authorizer.py`` measures it).

Not thread-safe: the broker changes and reads it on its event loop only; ZooKeeper's
change notifications are posted there (``set_entries``) by the watcher.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Final

from tierlog.security.acl import (
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = ["AclCache"]

_NONE: Final[frozenset[AccessControlEntry]] = frozenset()


class AclCache:
    """Every ACL binding, indexed for ``matching``."""

    def __init__(self) -> None:
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self._prefix_lengths: dict[ResourceType, Counter[int]] = {}
        # Bumped by every change: decisions remembered under another version are stale.
        self.version = 0

    def __len__(self) -> int:
        literal = sum(len(entries) for entries in self._literal.values())
        prefixed = sum(len(e) for table in self._prefixed.values() for e in table.values())
        return literal + prefixed

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """The entries stored for exactly ``pattern``."""
        if pattern.pattern_type is PatternType.LITERAL:
            return self._literal.get((pattern.resource_type, pattern.name), _NONE)
        return self._prefixed.get(pattern.resource_type, {}).get(pattern.name, _NONE)

    def set_entries(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """Replaces ``pattern``'s entries (an empty set removes the pattern)."""
        self.version += 1
        if pattern.pattern_type is PatternType.LITERAL:
            key = (pattern.resource_type, pattern.name)
            if entries:
                self._literal[key] = entries
            else:
                self._literal.pop(key, None)
            return
        table = self._prefixed.setdefault(pattern.resource_type, {})
        lengths = self._prefix_lengths.setdefault(pattern.resource_type, Counter())
        had = pattern.name in table
        if entries:
            table[pattern.name] = entries
            if not had:
                lengths[len(pattern.name)] += 1
        elif had:
            del table[pattern.name]
            lengths[len(pattern.name)] -= 1
            if not lengths[len(pattern.name)]:
                del lengths[len(pattern.name)]

    def add(self, binding: AclBinding) -> bool:
        """Adds one binding; False if it was there already."""
        current = self.entries(binding.pattern)
        if binding.entry in current:
            return False
        self.set_entries(binding.pattern, current | {binding.entry})
        return True

    def remove(self, binding: AclBinding) -> bool:
        current = self.entries(binding.pattern)
        if binding.entry not in current:
            return False
        self.set_entries(binding.pattern, current - {binding.entry})
        return True

    def matching(
        self, resource_type: ResourceType, name: str
    ) -> list[frozenset[AccessControlEntry]]:
        """The entry sets of every pattern that applies to the named resource: its literal
        name, the wildcard, and each stored prefix of the name."""
        found = []
        literal = self._literal.get((resource_type, name))
        if literal:
            found.append(literal)
        if name != WILDCARD_RESOURCE:
            wildcard = self._literal.get((resource_type, WILDCARD_RESOURCE))
            if wildcard:
                found.append(wildcard)
        table = self._prefixed.get(resource_type)
        if table:
            for length in self._prefix_lengths[resource_type]:
                if length <= len(name):
                    entries = table.get(name[:length])
                    if entries:
                        found.append(entries)
        return found

    def bindings(self) -> Iterator[AclBinding]:
        for (resource_type, name), entries in self._literal.items():
            pattern = ResourcePattern(resource_type, name, PatternType.LITERAL)
            for entry in entries:
                yield AclBinding(pattern, entry)
        for resource_type, table in self._prefixed.items():
            for prefix, entries in table.items():
                pattern = ResourcePattern(resource_type, prefix, PatternType.PREFIXED)
                for entry in entries:
                    yield AclBinding(pattern, entry)

    def patterns(
        self, resource_type: ResourceType
    ) -> Iterator[tuple[ResourcePattern, frozenset[AccessControlEntry]]]:
        """Every stored pattern of a type with its entries (for by-resource-type checks)."""
        for (stored_type, name), entries in self._literal.items():
            if stored_type == resource_type:
                yield ResourcePattern(stored_type, name, PatternType.LITERAL), entries
        for prefix, entries in self._prefixed.get(resource_type, {}).items():
            yield ResourcePattern(resource_type, prefix, PatternType.PREFIXED), entries
