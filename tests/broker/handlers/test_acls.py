"""CreateAcls/DescribeAcls/DeleteAcls through the admin clients users have: confluent-kafka's
``AdminClient`` and kafka-python's ``KafkaAdminClient``, on a real broker process with the
ACL authorizer (``User:ANONYMOUS`` a super user, so the calls themselves are allowed; what
the ACLs refuse is the matrix's, ``tests/broker/test_authorization_matrix.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
)
from kafka.admin import ResourcePattern as KpPattern
from kafka.admin import ResourcePatternFilter as KpPatternFilter
from kafka.admin import ResourceType as KpType

from tests.broker.harness import BrokerProcess

pytestmark = pytest.mark.timeout(120)
SECURED = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path / "data", SECURED).start()
    try:
        yield broker
    finally:
        broker.stop()


def test_confluent_kafka_admin_acls(secured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    read = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    deny = AclBinding(
        ResourceType.GROUP,
        "etl-",
        ResourcePatternType.PREFIXED,
        "User:bob",
        "10.0.0.9",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    for future in admin.create_acls([read, deny]).values():
        assert future.result(15) is None

    everything = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert set(admin.describe_acls(everything).result(15)) == {read, deny}
    matching = AclBindingFilter(
        ResourceType.GROUP,
        "etl-daily",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(matching).result(15) == [deny]

    bobs = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:bob",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    [deleted] = admin.delete_acls([bobs]).values()
    assert deleted.result(15) == [deny]
    assert admin.describe_acls(everything).result(15) == [read]


def test_kafka_python_admin_acls(secured: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=secured.bootstrap, request_timeout_ms=15_000)
    try:
        write = ACL(
            "User:carol",
            "*",
            ACLOperation.WRITE,
            ACLPermissionType.ALLOW,
            KpPattern(KpType.TOPIC, "logs-", ACLResourcePatternType.PREFIXED),
        )
        created = admin.create_acls([write])
        assert created["failed"] == [] and len(created["succeeded"]) == 1, created
        found, error = admin.describe_acls(
            ACLFilter(
                "User:carol",
                None,
                ACLOperation.ANY,
                ACLPermissionType.ANY,
                KpPatternFilter(KpType.TOPIC, None, ACLResourcePatternType.ANY),
            )
        )
        assert error.errno == 0, error
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            ("User:carol", ACLOperation.WRITE, "logs-")
        ]
        [(_, deleted, error)] = admin.delete_acls(
            [
                ACLFilter(
                    "User:carol",
                    "*",
                    ACLOperation.ANY,
                    ACLPermissionType.ANY,
                    KpPatternFilter(KpType.TOPIC, "logs-", ACLResourcePatternType.PREFIXED),
                )
            ]
        )
        assert error.errno == 0 and len(deleted) == 1, (deleted, error)
    finally:
        admin.close()
