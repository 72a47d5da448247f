from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tierlog.security.acl_zk import (
    acl_change_path,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    resource_from_path,
    resource_path,
)
from tierlog.security.errors import InvalidAclError

# What Kafka 3.x's AclAuthorizer wrote into a real cluster (ZkData's example).
KAFKA_ZNODE = (
    b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
    b'"operation":"Read","host":"*"},{"host":"host1","permissionType":"Deny",'
    b'"operation":"DescribeConfigs","principal":"User:bob"}]}'
)


def test_reads_kafkas_znode() -> None:
    assert decode_acls(KAFKA_ZNODE) == {
        AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
        AccessControlEntry(
            "User:bob", "host1", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.DENY
        ),
    }
    assert decode_acls(b"") == frozenset() and decode_acls(None) == frozenset()


def test_writes_kafkas_json() -> None:
    entry = AccessControlEntry(
        "User:alice", "*", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW
    )
    assert json.loads(encode_acls([entry])) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "IdempotentWrite",
                "host": "*",
            }
        ],
    }


def test_paths() -> None:
    literal = ResourcePattern(ResourceType.TOPIC, "orders")
    prefixed = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "app-", PatternType.PREFIXED)
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")
    assert resource_path(literal) == "/kafka-acl/Topic/orders"
    assert resource_path(prefixed) == "/kafka-acl-extended/prefixed/TransactionalId/app-"
    assert resource_path(cluster) == "/kafka-acl/Cluster/kafka-cluster"
    for pattern in (literal, prefixed, cluster):
        assert resource_from_path(resource_path(pattern)) == pattern
    assert acl_change_path(PatternType.LITERAL) == "/kafka-acl-changes/acl_changes_"
    assert acl_change_path(PatternType.PREFIXED) == "/kafka-acl-extended-changes/acl_changes_"
    with pytest.raises(InvalidAclError):
        resource_from_path("/brokers/topics/x")


def test_change_notifications() -> None:
    literal = ResourcePattern(ResourceType.TOPIC, "a:b")
    assert encode_acl_change(literal) == b"TOPIC:a:b"
    assert decode_acl_change(b"TOPIC:a:b", extended=False) == literal
    assert decode_acl_change(b"Topic:a:b", extended=False) == literal  # Kafka 1.x wrote this
    prefixed = ResourcePattern(ResourceType.GROUP, "etl-", PatternType.PREFIXED)
    assert json.loads(encode_acl_change(prefixed)) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "etl-",
        "patternType": "PREFIXED",
    }
    assert decode_acl_change(encode_acl_change(prefixed), extended=True) == prefixed


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b'{"version":2,"acls":[]}',
        b'{"version":1}',
        b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe","operation":"Read","host":"*"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read"}]}',
        b"[1]",
    ],
)
def test_bad_znodes_are_refused(data: bytes) -> None:
    with pytest.raises(InvalidAclError):
        decode_acls(data)


@pytest.mark.parametrize(
    ("data", "extended"),
    [
        (b"TOPIC", False),
        (b"Nope:x", False),
        (b"{", True),
        (b'{"version":2,"resourceType":"TOPIC","name":"x","patternType":"PREFIXED"}', True),
        (b'{"version":1,"resourceType":"TOPIC","name":"x","patternType":"MATCH"}', True),
    ],
)
def test_bad_change_notifications_are_refused(data: bytes, extended: bool) -> None:
    with pytest.raises(InvalidAclError):
        decode_acl_change(data, extended)


_entries = st.builds(
    AccessControlEntry,
    st.from_regex(r"User:[a-z*]{1,6}", fullmatch=True),
    st.sampled_from(["*", "10.0.0.1", "::1"]),
    st.sampled_from(
        [op for op in AclOperation if op not in (AclOperation.ANY, AclOperation.UNKNOWN)]
    ),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)


@given(st.frozensets(_entries, max_size=8))
def test_entries_round_trip(entries: frozenset[AccessControlEntry]) -> None:
    assert decode_acls(encode_acls(entries)) == entries
