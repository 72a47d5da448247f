"""Single-node mode's ACLs and user configs (SCRAM credentials), kept in the local metadata
store (``local.LocalCoordinator``'s ``acls`` and ``users`` records: snapshot and journal,
durable before a change is answered) in the form ZooKeeper mode keeps them: an ACL pattern
under its znode path with Kafka's JSON, a user's config as Kafka's config map.

One broker is the only writer, so there is no change to follow; the records can also be
written before the broker first runs (``tierlog users add --data-dir``), through the same
store opened on the data dir.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from tierlog.broker.coordination.local import LocalCoordinator
from tierlog.security.acl import ResourcePattern
from tierlog.security.acl_zk import decode_acls, encode_acls, resource_from_path, resource_path
from tierlog.security.api import AclStoreError, Entries

__all__ = ["LocalAclStore", "LocalUserConfigs"]


class LocalAclStore:
    """``AclStore`` over the single node's metadata store."""

    def __init__(self, store: LocalCoordinator) -> None:
        self._store = store

    async def load(self) -> Mapping[ResourcePattern, Entries]:
        return {
            resource_from_path(path): decode_acls(json.dumps(document).encode())
            for path, document in self._store.records("acls").items()
        }

    async def update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> Entries:
        stored: list[Entries] = []

        def apply(current: Any | None) -> Any | None:
            entries = frozenset(change(_decode(current)))
            stored.append(entries)
            return json.loads(encode_acls(entries)) if entries else None

        try:
            await self._store.update_record("acls", resource_path(pattern), apply)
        except Exception as exc:  # the journal's write failed (CoordinationError)
            raise AclStoreError(f"cannot store the ACLs of {pattern}: {exc}") from exc
        return stored[-1]

    def follow(self, on_change: Callable[[ResourcePattern, Entries], None]) -> None:
        """One writer, this broker: nothing changes behind its back."""

    async def close(self) -> None:
        """The metadata store is the broker's to close."""


def _decode(document: Any | None) -> Entries:
    return frozenset() if document is None else decode_acls(json.dumps(document).encode())


class LocalUserConfigs:
    """Users' configs (``SCRAM-SHA-256`` -> Kafka's credential text), as ``/config/users``."""

    def __init__(self, store: LocalCoordinator) -> None:
        self._store = store

    async def describe(self, users: list[str] | None = None) -> dict[str, dict[str, str]]:
        records = self._store.records("users")
        names = sorted(records) if users is None else users
        return {user: dict(records[user]) for user in names if records.get(user)}

    async def alter(
        self, user: str, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        """Replace ``user``'s config by ``change(current)``; an empty config removes it."""
        new = await self._store.update_record(
            "users", user, lambda current: change(dict(current or {})) or None
        )
        return dict(new or {})
