"""The ACL authorizer: Kafka's ``AclAuthorizer``/``StandardAuthorizer`` decisions over an
``AclCache``.

A decision for (principal, host, operation, resource), in Kafka's order:

1. a principal in ``super.users`` (``User:a;User:b``) is allowed everything;
2. the ACLs that apply to the resource are its literal pattern, the wildcard ``*`` and
   every prefix pattern of its name; if there are none, ``allow.everyone.if.no.acl.found``
   decides (default false);
3. a matching Deny (principal or ``User:*``, host or ``*``, the operation or ``All``)
   denies: Deny wins;
4. a matching Allow of the operation, ``All``, or an operation implying it
   (``acl.IMPLIED_BY``) allows;
5. otherwise denied.

Each denial logs one line on ``kafka.authorizer.logger`` (allowed actions too when the
action asks, at DEBUG: set the logger to DEBUG to see grants, as with Kafka's log4j), in
Kafka's words: principal, operation, host, resource, API.

The ACLs are kept by an ``AclStore`` (ZooKeeper in Kafka's layout, the single node's
metadata store, or memory) and decided from an ``AclCache`` on the event loop. A change
is written to the store first, pattern by pattern (the store makes it atomic against other
writers), and the cache takes the entries the store answers; changes made elsewhere (other
brokers, ``kafka-acls``) reach the cache through ``AclStore.follow``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from tierlog.security.acl import (
    IMPLIED_BY,
    WILDCARD_HOST,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_new_binding,
)
from tierlog.security.acl_cache import AclCache
from tierlog.security.acl_memory_store import MemoryAclStore
from tierlog.security.api import (
    AclCreateResult,
    AclDeleteResult,
    AclStore,
    AclStoreError,
    Action,
    AuthorizationResult,
    Entries,
    RequestContext,
)
from tierlog.security.errors import InvalidAclError, SecurityConfigError
from tierlog.security.principal import WILDCARD_PRINCIPAL, KafkaPrincipal, parse_principal

__all__ = ["AclAuthorizer", "parse_super_users"]

AUDIT_LOG: Final = logging.getLogger("kafka.authorizer.logger")
_WILDCARD_PRINCIPAL: Final = str(WILDCARD_PRINCIPAL)
# operation asked -> the Allow operations that grant it (itself, All, what implies it).
_GRANTING: Final = {
    operation: frozenset({operation, AclOperation.ALL} | IMPLIED_BY.get(operation, frozenset()))
    for operation in AclOperation
}


# Decisions remembered at most (each a small tuple and a bool).
_DECISIONS_KEPT: Final = 65_536


def parse_super_users(text: str | None) -> frozenset[KafkaPrincipal]:
    """``super.users=User:admin;User:broker`` (semicolon separated, as Kafka).

    Raises:
        SecurityConfigError: an entry that is not ``Type:name``.
    """
    users = set()
    for part in (text or "").split(";"):
        if part.strip():
            try:
                users.add(parse_principal(part.strip()))
            except InvalidAclError as exc:
                raise SecurityConfigError("super.users", str(exc)) from None
    return frozenset(users)


class AclAuthorizer:
    """ACL decisions and the ACL store (``Authorizer``); see the module docstring."""

    def __init__(
        self,
        super_users: Iterable[KafkaPrincipal] = (),
        allow_everyone_if_no_acl_found: bool = False,
        store: AclStore | None = None,
    ) -> None:
        self._super_users = frozenset(super_users)
        self._allow_if_no_acls = allow_everyone_if_no_acl_found
        self._store: AclStore = MemoryAclStore() if store is None else store
        self._cache = AclCache()
        # Decisions remembered while the ACLs stay as they are: every produce request asks
        # the same few questions, and a lookup among the prefixes, walking their entries,
        # cost more than the rest of the request's checks (profiled with 10,000 ACLs).
        self._decisions: dict[tuple[Any, ...], bool] = {}
        self._decisions_version = -1

    @classmethod
    def from_config(cls, config: dict[str, str], store: AclStore | None = None) -> AclAuthorizer:
        """From ``super.users`` and ``allow.everyone.if.no.acl.found`` (strings), keeping
        its ACLs in ``store`` (memory when None)."""
        allow = str(config.get("allow.everyone.if.no.acl.found", "false")).strip().lower()
        if allow not in ("true", "false"):
            raise SecurityConfigError(
                "allow.everyone.if.no.acl.found", f"expected true or false, got {allow!r}"
            )
        return cls(parse_super_users(config.get("super.users")), allow == "true", store)

    async def start(self) -> None:
        """Loads every stored ACL into the cache and follows changes made elsewhere."""
        for pattern, entries in (await self._store.load()).items():
            self._cache.set_entries(pattern, frozenset(entries))
        self._store.follow(self._cache.set_entries)

    async def close(self) -> None:
        await self._store.close()

    # --- decisions -----------------------------------------------------------------------

    @property
    def decisions_version(self) -> int | None:
        """``MemoizableAuthorizer``: the ACL cache's version (super users and
        ``allow.everyone.if.no.acl.found`` are static); None while grants are audited
        (``kafka.authorizer.logger`` at DEBUG), so each one gets its line."""
        if AUDIT_LOG.isEnabledFor(logging.DEBUG):
            return None
        return self._cache.version

    def authorize(
        self, context: RequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]:
        return [self._authorize_one(context, action) for action in actions]

    def allowed(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource: ResourcePattern,
    ) -> bool:
        """The bare decision, without audit logging."""
        if principal in self._super_users:
            return True
        if self._decisions_version != self._cache.version:
            self._decisions.clear()
            self._decisions_version = self._cache.version
        key = (principal, host, operation, resource)
        decided = self._decisions.get(key)
        if decided is None:
            if len(self._decisions) >= _DECISIONS_KEPT:
                self._decisions.clear()  # many principals or names: start over
            decided = self._decisions[key] = self._decide(principal, host, operation, resource)
        return decided

    def _decide(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource: ResourcePattern,
    ) -> bool:
        entry_sets = self._cache.matching(resource.resource_type, resource.name)
        if not entry_sets:
            return self._allow_if_no_acls
        principals = (str(principal), _WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        granting = _GRANTING[operation]
        allowed = False
        for entries in entry_sets:
            for entry in entries:
                if entry.principal not in principals or entry.host not in hosts:
                    continue
                if entry.permission_type is AclPermissionType.DENY:
                    if entry.operation is operation or entry.operation is AclOperation.ALL:
                        return False
                elif entry.operation in granting:
                    allowed = True
        return allowed

    def _authorize_one(self, context: RequestContext, action: Action) -> AuthorizationResult:
        ok = self.allowed(context.principal, context.client_host, action.operation, action.resource)
        level = logging.DEBUG if ok else logging.INFO
        logged = action.log_if_allowed if ok else action.log_if_denied
        # The audit line's arguments only when it is written: grants are decided on every
        # produce request, and their DEBUG line is usually off.
        if logged and AUDIT_LOG.isEnabledFor(level):
            resource = action.resource
            AUDIT_LOG.log(
                level,
                "Principal = %s is %s operation = %s from host = %s on resource = %s:%s:%s "
                "for request = %s with resourceRefCount = 1",
                context.principal,
                "Allowed" if ok else "Denied",
                action.operation.kafka_name,
                context.client_host,
                resource.resource_type.kafka_name,
                resource.pattern_type.name,
                resource.name,
                context.api_key,
            )
        return AuthorizationResult.ALLOWED if ok else AuthorizationResult.DENIED

    def authorize_by_resource_type(
        self, context: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> AuthorizationResult:
        """Kafka's ``Authorizer.authorizeByResourceType`` default (KIP-679)."""
        # Kafka first checks a made-up name: super users, a wildcard Allow and
        # allow.everyone.if.no.acl.found all pass there, whatever prefix Denies exist.
        probe = ResourcePattern(resource_type, "hardcode", PatternType.LITERAL)
        if self.allowed(context.principal, context.client_host, operation, probe):
            return AuthorizationResult.ALLOWED
        principals = (str(context.principal), _WILDCARD_PRINCIPAL)
        hosts = (context.client_host, WILDCARD_HOST)
        deny: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        allow: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        for pattern, entries in self._cache.patterns(resource_type):
            for entry in entries:
                if entry.principal not in principals or entry.host not in hosts:
                    continue
                if entry.operation is not operation and entry.operation is not AclOperation.ALL:
                    continue
                if entry.permission_type is AclPermissionType.DENY:
                    if (
                        pattern.pattern_type is PatternType.LITERAL
                        and pattern.name == WILDCARD_RESOURCE
                    ):
                        return AuthorizationResult.DENIED
                    deny[pattern.pattern_type].add(pattern.name)
                elif (
                    pattern.pattern_type is PatternType.LITERAL
                    and pattern.name == WILDCARD_RESOURCE
                ):
                    return AuthorizationResult.ALLOWED
                else:
                    allow[pattern.pattern_type].add(pattern.name)
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type is PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:n] in deny[PatternType.PREFIXED] for n in range(1, len(name) + 1)):
                    return AuthorizationResult.ALLOWED
        return AuthorizationResult.DENIED

    # --- the ACLs ------------------------------------------------------------------------

    @property
    def cache(self) -> AclCache:
        return self._cache

    def acls(self, filter: AclBindingFilter) -> list[AclBinding]:
        return [binding for binding in self._cache.bindings() if filter.matches(binding)]

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclCreateResult]:
        """Each binding's result, in order; valid bindings are written one pattern at a
        time (a pattern's new entries in one store update)."""
        errors: dict[int, str] = {}
        store_failed: set[int] = set()
        by_pattern: dict[ResourcePattern, list[int]] = defaultdict(list)
        for index, binding in enumerate(bindings):
            try:
                validate_new_binding(binding)
            except InvalidAclError as exc:
                errors[index] = str(exc)
                continue
            by_pattern[binding.pattern].append(index)
        for pattern, indexes in by_pattern.items():
            added = frozenset(bindings[i].entry for i in indexes)
            try:
                stored = await self._store.update(pattern, _adding(added))
            except AclStoreError as exc:
                errors.update((i, str(exc)) for i in indexes)
                store_failed.update(indexes)
                continue
            self._cache.set_entries(pattern, stored)
        return [
            AclCreateResult(b, errors.get(i), i in store_failed) for i, b in enumerate(bindings)
        ]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """Each filter's deleted bindings (what it matched when asked), or its error."""
        matched: list[tuple[AclBinding, ...] | str] = []
        doomed: dict[ResourcePattern, set[AccessControlEntry]] = defaultdict(set)
        for acl_filter in filters:
            try:
                acl_filter.check()
            except InvalidAclError as exc:
                matched.append(str(exc))
                continue
            found = tuple(self.acls(acl_filter))
            matched.append(found)
            for binding in found:
                doomed[binding.pattern].add(binding.entry)
        failed: dict[ResourcePattern, str] = {}
        for pattern, entries in doomed.items():
            gone = frozenset(entries)
            try:
                stored = await self._store.update(pattern, _removing(gone))
            except AclStoreError as exc:
                failed[pattern] = str(exc)
                continue
            self._cache.set_entries(pattern, stored)
        results = []
        for acl_filter, outcome in zip(filters, matched, strict=True):
            if isinstance(outcome, str):
                results.append(AclDeleteResult(acl_filter, error=outcome))
                continue
            error = next((failed[b.pattern] for b in outcome if b.pattern in failed), None)
            if error is not None:
                results.append(AclDeleteResult(acl_filter, error=error, store_failed=True))
            else:
                results.append(AclDeleteResult(acl_filter, outcome))
        return results


def _adding(added: frozenset[AccessControlEntry]) -> Callable[[Entries], Entries]:
    return lambda current: current | added


def _removing(gone: frozenset[AccessControlEntry]) -> Callable[[Entries], Entries]:
    return lambda current: current - gone
