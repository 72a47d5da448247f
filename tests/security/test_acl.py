from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    validate_new_binding,
)
from tierlog.security.errors import InvalidAclError

TOPIC = ResourceType.TOPIC


def test_wire_codes_and_names_are_kafkas() -> None:
    assert (ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID, ResourceType.USER) == (2, 5, 7)
    assert (PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == (2, 3, 4)
    assert (
        AclOperation.CLUSTER_ACTION,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.DESCRIBE_TOKENS,
    ) == (9, 12, 14)
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)
    assert ResourceType.TRANSACTIONAL_ID.kafka_name == "TransactionalId"
    assert AclOperation.parse("ClusterAction") is AclOperation.CLUSTER_ACTION
    assert AclOperation.parse("DESCRIBE_CONFIGS") is AclOperation.DESCRIBE_CONFIGS
    assert ResourceType.parse("topic") is TOPIC
    with pytest.raises(InvalidAclError):
        AclOperation.parse("Fly")


def test_patterns_may_not_be_filters() -> None:
    with pytest.raises(InvalidAclError):
        ResourcePattern(ResourceType.ANY, "x")
    with pytest.raises(InvalidAclError):
        ResourcePattern(TOPIC, "x", PatternType.MATCH)


def _p(name: str, pattern_type: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(TOPIC, name, pattern_type)


@pytest.mark.parametrize(
    ("filter_", "pattern", "matches"),
    [
        (ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH), _p("orders"), True),
        (ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH), _p("*"), True),
        (
            ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH),
            _p("ord", PatternType.PREFIXED),
            True,
        ),
        (
            ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH),
            _p("x", PatternType.PREFIXED),
            False,
        ),
        (
            ResourcePatternFilter(TOPIC, "ord", PatternType.ANY),
            _p("ord", PatternType.PREFIXED),
            True,
        ),
        (ResourcePatternFilter(TOPIC, "ord", PatternType.ANY), _p("orders"), False),
        (ResourcePatternFilter(TOPIC, "*", PatternType.LITERAL), _p("*"), True),
        (ResourcePatternFilter(TOPIC, "orders", PatternType.LITERAL), _p("*"), False),
        (ResourcePatternFilter(ResourceType.GROUP), _p("orders"), False),
        (ResourcePatternFilter(), _p("orders", PatternType.PREFIXED), True),
    ],
)
def test_pattern_filters_as_kafka(
    filter_: ResourcePatternFilter, pattern: ResourcePattern, matches: bool
) -> None:
    assert filter_.matches(pattern) is matches


def test_entry_filters_and_indefinite_fields() -> None:
    entry = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    assert AccessControlEntryFilter().matches(entry)
    assert AccessControlEntryFilter(
        "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW
    ).matches(entry)
    assert not AccessControlEntryFilter(operation=AclOperation.WRITE).matches(entry)
    assert not AccessControlEntryFilter(permission_type=AclPermissionType.DENY).matches(entry)
    assert ResourcePatternFilter(TOPIC, "x", PatternType.LITERAL).indefinite_field() is None
    assert (
        ResourcePatternFilter(TOPIC, "x", PatternType.MATCH).indefinite_field()
        == "Resource pattern type is MATCH."
    )
    with pytest.raises(InvalidAclError, match="Unknown entryFilter"):
        AclBindingFilter(entry=AccessControlEntryFilter(operation=AclOperation.UNKNOWN)).check()


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (
            AclBinding(
                ResourcePattern(ResourceType.CLUSTER, "other"),
                AccessControlEntry("User:a", "*", AclOperation.ALTER, AclPermissionType.ALLOW),
            ),
            "kafka-cluster",
        ),
        (
            AclBinding(
                _p(""),
                AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW),
            ),
            "empty",
        ),
        (
            AclBinding(
                _p("t"),
                AccessControlEntry("User:a", "*", AclOperation.ANY, AclPermissionType.ALLOW),
            ),
            "Invalid operation ANY",
        ),
        (
            AclBinding(
                _p("t"), AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ANY)
            ),
            "Invalid permissionType",
        ),
        (
            AclBinding(
                _p("t"),
                AccessControlEntry("alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
            ),
            "principalType:principalName",
        ),
        (
            AclBinding(
                ResourcePattern(ResourceType.UNKNOWN, "t"),
                AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW),
            ),
            "Invalid resourceType",
        ),
    ],
)
def test_create_acls_refusals(binding: AclBinding, reason: str) -> None:
    with pytest.raises(InvalidAclError, match=reason):
        validate_new_binding(binding)


_names = st.text(st.sampled_from("ab*"), min_size=1, max_size=4)


@given(_names, _names, st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]))
def test_match_filter_is_what_applies_to_the_resource(
    resource: str, stored: str, pattern_type: PatternType
) -> None:
    # MATCH finds exactly the stored patterns an authorizer would apply to ``resource``.
    applies = (
        stored == resource or stored == "*"
        if pattern_type is PatternType.LITERAL
        else resource.startswith(stored)
    )
    assert (
        ResourcePatternFilter(TOPIC, resource, PatternType.MATCH).matches(_p(stored, pattern_type))
        is applies
    )
