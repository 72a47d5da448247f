"""ACLs in ZooKeeper as Kafka's ``AclAuthorizer`` keeps them (codec only: paths and bytes).

Layout (Kafka's ``ZkData``; so ``kafka-acls`` and an existing Kafka 3.x cluster's ACLs
read as they are)::

    /kafka-acl/<Type>/<name>                      LITERAL patterns
    /kafka-acl-extended/prefixed/<Type>/<prefix>  PREFIXED patterns (KIP-290)
    /kafka-acl-changes/acl_changes_<seq>          "TOPIC:orders" (literal change)
    /kafka-acl-extended-changes/acl_changes_<seq> {"version":1,"resourceType":"TOPIC",
                                                   "name":"orders-","patternType":"PREFIXED"}

A resource znode holds every entry of that pattern::

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                          "operation":"Read","host":"*"}]}

``<Type>`` is the Pascal-case name (``Topic``, ``TransactionalId``); the change payloads
use the enum names (``TOPIC``), as Kafka's ``ResourceType.toString`` writes them; reading
accepts either case. Writers update a resource znode conditionally on its zkVersion and
retry on BadVersion, then add a change node; the ZooKeeper side lives with the broker's
ZooKeeper client, not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from tierlog.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tierlog.security.errors import InvalidAclError
from tierlog.security.principal import parse_principal

__all__ = [
    "ACL_CHANGE_PREFIX",
    "EXTENDED_ACL_CHANGES_PATH",
    "EXTENDED_ACL_PATH",
    "LITERAL_ACL_CHANGES_PATH",
    "LITERAL_ACL_PATH",
    "acl_change_path",
    "decode_acl_change",
    "decode_acls",
    "encode_acl_change",
    "encode_acls",
    "resource_from_path",
    "resource_path",
]

LITERAL_ACL_PATH: Final = "/kafka-acl"
EXTENDED_ACL_PATH: Final = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH: Final = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH: Final = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX: Final = "acl_changes_"
_VERSION: Final = 1


def _store(pattern_type: PatternType) -> str:
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"
    raise InvalidAclError(f"no ZooKeeper store for pattern type {pattern_type.name}")


def resource_path(pattern: ResourcePattern) -> str:
    """The znode holding ``pattern``'s entries."""
    return f"{_store(pattern.pattern_type)}/{pattern.resource_type.kafka_name}/{pattern.name}"


def resource_from_path(path: str) -> ResourcePattern:
    """The pattern a resource znode path stands for (the inverse of ``resource_path``).

    Raises:
        InvalidAclError: not a path under ``/kafka-acl`` or ``/kafka-acl-extended/prefixed``.
    """
    for pattern_type in (PatternType.PREFIXED, PatternType.LITERAL):
        root = _store(pattern_type) + "/"
        if path.startswith(root):
            type_name, sep, name = path[len(root) :].partition("/")
            if sep and name:
                return ResourcePattern(ResourceType.parse(type_name), name, pattern_type)
    raise InvalidAclError(f"not an ACL resource path: {path!r}")


def acl_change_path(pattern_type: PatternType) -> str:
    """The sequential znode prefix a change to a ``pattern_type`` pattern is written under."""
    root = (
        LITERAL_ACL_CHANGES_PATH
        if pattern_type is PatternType.LITERAL
        else EXTENDED_ACL_CHANGES_PATH
    )
    return f"{root}/{ACL_CHANGE_PREFIX}"


def _entry_json(entry: AccessControlEntry) -> dict[str, str]:
    return {
        "principal": entry.principal,
        "permissionType": entry.permission_type.kafka_name,
        "operation": entry.operation.kafka_name,
        "host": entry.host,
    }


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource znode's bytes (entries sorted, so equal sets encode equally)."""
    acls = sorted((_entry_json(e) for e in set(entries)), key=lambda d: tuple(d.values()))
    return json.dumps({"version": _VERSION, "acls": acls}, separators=(",", ":")).encode()


def _field(item: dict[str, Any], name: str) -> str:
    value = item.get(name)
    if not isinstance(value, str):
        raise InvalidAclError(f"ACL entry without a string {name!r}: {item!r}")
    return value


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """A resource znode's entries; empty or missing data is no entries (as Kafka reads it).

    Raises:
        InvalidAclError: not Kafka's JSON, version not 1, or an entry Kafka cannot read.
    """
    if not data:
        return frozenset()
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise InvalidAclError("ACL znode is not JSON") from None
    if not isinstance(document, dict) or document.get("version") != _VERSION:
        raise InvalidAclError(f"ACL znode version is not {_VERSION}")
    items = document.get("acls")
    if not isinstance(items, list):
        raise InvalidAclError("ACL znode has no 'acls' list")
    entries = set()
    for item in items:
        if not isinstance(item, dict):
            raise InvalidAclError(f"ACL entry is not an object: {item!r}")
        principal = _field(item, "principal")
        parse_principal(principal)
        entries.add(
            AccessControlEntry(
                principal,
                _field(item, "host"),
                AclOperation.parse(_field(item, "operation")),
                AclPermissionType.parse(_field(item, "permissionType")),
            )
        )
    return frozenset(entries)


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """The payload of a change notification for ``pattern``."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": _VERSION,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return json.dumps(event, separators=(",", ":")).encode()


def decode_acl_change(data: bytes, extended: bool) -> ResourcePattern:
    """The pattern a change notification names (``extended``: from the extended path).

    Raises:
        InvalidAclError: a payload Kafka would not read.
    """
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise InvalidAclError("ACL change is not UTF-8") from None
    if not extended:
        type_name, sep, name = text.partition(":")
        if not sep:
            raise InvalidAclError(
                f"expected a string in format ResourceType:ResourceName but got {text}"
            )
        return ResourcePattern(ResourceType.parse(type_name), name, PatternType.LITERAL)
    try:
        event = json.loads(text)
    except ValueError:
        raise InvalidAclError("Failed to parse ACL change event") from None
    if not isinstance(event, dict) or not isinstance(event.get("version"), int):
        raise InvalidAclError("Failed to parse ACL change event")
    if event["version"] > _VERSION:
        raise InvalidAclError(
            f"Acl change event received for unsupported version: {event['version']}"
        )
    return ResourcePattern(
        ResourceType.parse(_field(event, "resourceType")),
        _field(event, "name"),
        PatternType.parse(_field(event, "patternType")),
    )
