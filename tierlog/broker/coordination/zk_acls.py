"""ACLs in ZooKeeper, as Kafka's ``AclAuthorizer`` keeps them, and the ``AclStore`` over them.

Paths and JSON are the security layer's codec (``tierlog.security.acl_zk``)::

    /kafka-acl/<Type>/<name>                        LITERAL patterns
    /kafka-acl-extended/prefixed/<Type>/<prefix>    PREFIXED patterns
    /kafka-acl-changes/acl_changes_<seq>            a literal pattern changed
    /kafka-acl-extended-changes/acl_changes_<seq>   a prefixed pattern changed

A change (Kafka's ``AclAuthorizer.updateResourceAcls``): read the pattern's znode and its
zkVersion, compute the new entries, write them conditionally on that version (create when
absent, delete when empty), retry from the read when another writer won; then add a
sequential change notification naming the pattern. Every broker (this one included) follows
the notifications (Kafka's ``ZkNodeChangeNotificationListener``): on a change of either
changes path, each notification newer than the last one processed is read, and the
pattern it names is read again into the cache. Notifications older than 15 minutes are
deleted by whoever sees them (Kafka's ``changeExpirationMs``). Since a notification only
names a pattern, processing one twice or late is harmless.

An existing Kafka 3.x cluster's ACL znodes are read as they are; ``kafka-acls
--authorizer-properties zookeeper.connect=...`` (Kafka before 3.0 wrote them itself) and
brokers interoperate through the same notifications.

Threads: ``ZkAcls`` blocks (call it off the loop); ``ZkAclStore`` runs it with
``asyncio.to_thread`` and processes notifications on its own thread, posting each
pattern's entries to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from tierlog.broker.coordination.zk_session import MAX_ATTEMPTS, ZkSession
from tierlog.security.acl import PatternType, ResourcePattern, ResourceType
from tierlog.security.acl_zk import (
    ACL_CHANGE_PREFIX,
    EXTENDED_ACL_CHANGES_PATH,
    EXTENDED_ACL_PATH,
    LITERAL_ACL_CHANGES_PATH,
    LITERAL_ACL_PATH,
    acl_change_path,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    resource_path,
)
from tierlog.security.api import AclStoreError, Entries
from tierlog.security.errors import InvalidAclError
from tierlog.util.clock import Clock, SystemClock

try:
    from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
except ImportError as e:  # pragma: no cover - zk_session says how to install it
    raise ImportError(f"cluster mode needs kazoo ({e}): pip install 'tierlog[cluster]'") from e

__all__ = ["CHANGE_EXPIRATION_MS", "ZkAclStore", "ZkAcls"]

log = logging.getLogger(__name__)

# Kafka's ZkNodeChangeNotificationListener default: notifications live 15 minutes.
CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000
_STORES: Final = (
    (PatternType.LITERAL, LITERAL_ACL_PATH),
    (PatternType.PREFIXED, f"{EXTENDED_ACL_PATH}/prefixed"),
)
_CHANGES: Final = ((LITERAL_ACL_CHANGES_PATH, False), (EXTENDED_ACL_CHANGES_PATH, True))


def _sequence(child: str) -> int | None:
    if not child.startswith(ACL_CHANGE_PREFIX):
        return None
    digits = child[len(ACL_CHANGE_PREFIX) :]
    return int(digits) if digits.isdigit() else None


class ZkAcls:
    """The ACL znodes (blocking).

    Args:
        session: a started session.
        clock: ages change notifications.
    """

    def __init__(self, session: ZkSession, clock: Clock | None = None) -> None:
        self._session = session
        self._clock = clock or SystemClock()

    @property
    def session(self) -> ZkSession:
        return self._session

    def ensure_paths(self) -> None:
        """Kafka's persistent ACL paths (created at start-up when missing)."""
        kazoo = self._session.kazoo
        for _, root in _STORES:
            kazoo.ensure_path(root)
        for path, _ in _CHANGES:
            kazoo.ensure_path(path)

    def read(self, pattern: ResourcePattern) -> Entries:
        found = self._session.get(resource_path(pattern))
        return frozenset() if found is None else decode_acls(found.data)

    def read_all(self) -> dict[ResourcePattern, Entries]:
        """Every pattern with entries; a znode Kafka could not read either is skipped with
        a warning (one bad znode must not hide every other ACL)."""
        session = self._session
        found: dict[ResourcePattern, Entries] = {}
        for pattern_type, root in _STORES:
            for type_name in session.children(root):
                try:
                    resource_type = ResourceType.parse(type_name)
                except InvalidAclError:
                    log.warning("skipping ACLs of unknown resource type %s/%s", root, type_name)
                    continue
                for name in session.children(f"{root}/{type_name}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    try:
                        entries = self.read(pattern)
                    except InvalidAclError as exc:
                        log.warning("skipping unreadable ACL znode %s: %s", root, exc)
                        continue
                    if entries:
                        found[pattern] = entries
        return found

    def update(self, pattern: ResourcePattern, change: Callable[[Entries], Entries]) -> Entries:
        """Replace ``pattern``'s entries by ``change(current)`` conditionally on the znode's
        version (retried when another writer won), then announce it; returns the entries.

        Raises:
            AclStoreError: still losing after ``MAX_ATTEMPTS`` tries, or an unreadable znode.
        """
        kazoo = self._session.kazoo
        path = resource_path(pattern)
        for _ in range(MAX_ATTEMPTS):
            try:
                data, stat = kazoo.get(path)
                current, version = decode_acls(data), stat.version
            except NoNodeError:
                current, version = frozenset(), None
            except InvalidAclError as exc:
                raise AclStoreError(f"{path}: {exc}") from None
            new = frozenset(change(current))
            if new == current:
                return new
            try:
                if version is None:
                    kazoo.create(path, encode_acls(new), makepath=True)
                elif new:
                    kazoo.set(path, encode_acls(new), version=version)
                else:
                    kazoo.delete(path, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another writer changed it since the read: read again
            kazoo.create(
                acl_change_path(pattern.pattern_type),
                encode_acl_change(pattern),
                sequence=True,
                makepath=True,
            )
            return new
        raise AclStoreError(f"{path}: too many concurrent updates, gave up")

    def changes(self, extended: bool) -> list[tuple[int, str]]:
        """(sequence, child) of the notifications under one changes path, oldest first."""
        root = EXTENDED_ACL_CHANGES_PATH if extended else LITERAL_ACL_CHANGES_PATH
        numbered = []
        for child in self._session.children(root):
            sequence = _sequence(child)
            if sequence is not None:
                numbered.append((sequence, child))
        return sorted(numbered)

    def read_change(self, extended: bool, child: str) -> ResourcePattern | None:
        """The pattern a notification names (None if it is gone or unreadable)."""
        root = EXTENDED_ACL_CHANGES_PATH if extended else LITERAL_ACL_CHANGES_PATH
        path = f"{root}/{child}"
        found = self._session.get(path)
        if found is None:
            return None
        try:
            return decode_acl_change(found.data or b"", extended)
        except InvalidAclError as exc:
            log.warning("skipping unreadable ACL change %s: %s", path, exc)
            return None

    def purge(self, extended: bool, up_to: int) -> None:
        """Delete the notifications up to sequence ``up_to`` older than
        ``CHANGE_EXPIRATION_MS`` (Kafka's purgeObsoleteNotifications)."""
        root = EXTENDED_ACL_CHANGES_PATH if extended else LITERAL_ACL_CHANGES_PATH
        kazoo = self._session.kazoo
        now = self._clock.milliseconds()
        for sequence, child in self.changes(extended):
            if sequence > up_to:
                break
            stat = kazoo.exists(f"{root}/{child}")
            if stat is not None and now - stat.ctime > CHANGE_EXPIRATION_MS:
                with contextlib.suppress(NoNodeError):
                    kazoo.delete(f"{root}/{child}")


class ZkAclStore:
    """``AclStore`` over ``ZkAcls``: writes off the loop, notifications followed on a
    thread of its own (see the module docstring)."""

    def __init__(self, acls: ZkAcls) -> None:
        self._acls = acls
        self._last: dict[bool, int] = {False: -1, True: -1}
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._watches: list[Any] = []

    async def load(self) -> Mapping[ResourcePattern, Entries]:
        def read() -> dict[ResourcePattern, Entries]:
            self._acls.ensure_paths()
            # The notifications first: one written after this listing is processed again
            # by the follower, which is harmless; one missed would not be.
            for _, extended in _CHANGES:
                changes = self._acls.changes(extended)
                self._last[extended] = changes[-1][0] if changes else -1
            return self._acls.read_all()

        return await asyncio.to_thread(read)

    async def update(
        self, pattern: ResourcePattern, change: Callable[[Entries], Entries]
    ) -> Entries:
        try:
            return await asyncio.to_thread(self._acls.update, pattern, change)
        except AclStoreError:
            raise
        except Exception as exc:  # ConnectionLoss, SessionExpired...
            raise AclStoreError(f"cannot store the ACLs of {pattern}: {exc!r}") from exc

    def follow(self, on_change: Callable[[ResourcePattern, Entries], None]) -> None:
        loop = asyncio.get_running_loop()

        def post(pattern: ResourcePattern, entries: Entries) -> None:
            if not self._closed.is_set():
                loop.call_soon_threadsafe(on_change, pattern, entries)

        self._thread = threading.Thread(
            target=self._follow, args=(post,), name="zk-acl-changes", daemon=True
        )
        self._thread.start()
        for path, _ in _CHANGES:
            self._watches.append(self._acls.session.watch_children(path, self._on_children))

    def _on_children(self, children: list[str]) -> bool:
        # kazoo's thread: never block here; the follower thread reads.
        self._wake.set()
        return not self._closed.is_set()

    def _follow(self, post: Callable[[ResourcePattern, Entries], None]) -> None:
        while not self._closed.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                self._process(post)
            except Exception as exc:
                log.warning("reading ACL changes from ZooKeeper failed: %r (retrying)", exc)
                self._closed.wait(0.5)
                self._wake.set()

    def _process(self, post: Callable[[ResourcePattern, Entries], None]) -> None:
        for _, extended in _CHANGES:
            for sequence, child in self._acls.changes(extended):
                if sequence <= self._last[extended]:
                    continue
                pattern = self._acls.read_change(extended, child)
                if pattern is not None:
                    post(pattern, self._acls.read(pattern))
                self._last[extended] = sequence
            self._acls.purge(extended, self._last[extended])

    async def close(self) -> None:
        self._closed.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            await asyncio.to_thread(thread.join, 5)
