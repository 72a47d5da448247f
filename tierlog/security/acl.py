"""Kafka's ACL model: resource patterns, entries, bindings, and the filters of
CreateAcls/DescribeAcls/DeleteAcls.

Enum values are Kafka's wire codes (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType``); ``.kafka_name`` is the name ZooKeeper's JSON and ``kafka-acls`` use
(``Topic``, ``ClusterAction``, ``Allow``). A binding is a ``ResourcePattern`` (type, name,
LITERAL or PREFIXED; the literal name ``*`` is the wildcard) plus an
``AccessControlEntry`` (principal, host, operation, Allow/Deny).

Which operation implies which (Kafka's ``AclAuthorizer``/``StandardAuthorizer``): an
Allow of Read, Write, Delete or Alter also allows Describe; an Allow of AlterConfigs also
allows DescribeConfigs; ``All`` matches every operation. Implication never widens a Deny:
a Deny of Read does not deny Describe.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, Self

from tierlog.security.errors import InvalidAclError
from tierlog.security.principal import parse_principal

__all__ = [
    "CLUSTER_NAME",
    "IMPLIED_BY",
    "WILDCARD_HOST",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "validate_new_binding",
]

WILDCARD_RESOURCE: Final = "*"
WILDCARD_HOST: Final = "*"
CLUSTER_NAME: Final = "kafka-cluster"


@functools.cache
def _camel(enum_name: str) -> str:
    # Kafka's SecurityUtils.toPascalCase: TRANSACTIONAL_ID -> TransactionalId
    return "".join(part.capitalize() for part in enum_name.split("_"))


class _Named(IntEnum):
    @property
    def kafka_name(self) -> str:
        return _camel(self.name)

    @classmethod
    def parse(cls, text: str) -> Self:
        """Kafka's ``SecurityUtils``: the Pascal-case name or the enum name, any case."""
        key = text.strip().replace("_", "").lower()
        for member in cls:
            if member.name.replace("_", "").lower() == key:
                return member
        raise InvalidAclError(f"unknown {cls.__name__} {text!r}")


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# operation asked -> the Allow operations that grant it (besides itself and ALL).
IMPLIED_BY: Final[dict[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type is ResourceType.ANY:
            raise InvalidAclError("resourceType must not be ANY")
        if self.pattern_type in (PatternType.MATCH, PatternType.ANY):
            raise InvalidAclError(f"patternType must not be {self.pattern_type.name}")

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """``name=None`` matches any name. MATCH finds every pattern that would apply to the
    named resource (literal equal, the wildcard, or a prefix of it); ANY any pattern type
    with exactly that name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if (
            self.resource_type is not ResourceType.ANY
            and self.resource_type != pattern.resource_type
        ):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    def indefinite_field(self) -> str | None:
        """Why this filter may match more than one pattern (Kafka's findIndefiniteField)."""
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """``None`` for principal or host matches any; ANY for operation or permission too."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != entry.operation:
            return False
        return (
            self.permission_type is AclPermissionType.ANY
            or self.permission_type == entry.permission_type
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def check(self) -> None:
        """Raises ``InvalidAclError`` for a filter with UNKNOWN fields (AclControlManager)."""
        if (
            self.pattern.resource_type is ResourceType.UNKNOWN
            or self.pattern.pattern_type is PatternType.UNKNOWN
        ):
            raise InvalidAclError("Unknown patternFilter.")
        if (
            self.entry.operation is AclOperation.UNKNOWN
            or self.entry.permission_type is AclPermissionType.UNKNOWN
        ):
            raise InvalidAclError("Unknown entryFilter.")


def validate_new_binding(binding: AclBinding) -> None:
    """What CreateAcls refuses (Kafka's AclControlManager and AclApis), with its messages.

    Raises:
        InvalidAclError: the reason, for the response's error message.
    """
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAclError(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAclError(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAclError(f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAclError(f"Invalid permissionType {entry.permission_type.name}")
    if not pattern.name:
        raise InvalidAclError("Resource name should not be empty")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAclError("The only valid name for the CLUSTER resource is kafka-cluster")
    if not entry.host:
        raise InvalidAclError("Host should not be empty")
    parse_principal(entry.principal)
