"""KIP-430 authorized operations (handlers/authorized_ops.py, decided by
broker/authorization.py): Kafka's bit fields, with and without an authorizer, and librdkafka
reading them from DescribeGroups."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AclOperation, AdminClient

from tierlog.broker.authorization import RequestAuthorizer
from tierlog.broker.embedded import EmbeddedBroker
from tierlog.broker.handlers.authorized_ops import OMITTED, authorized_operations
from tierlog.security.acl import AclOperation as Op
from tierlog.security.acl import ResourceType
from tierlog.security.api import Action, AuthorizationResult, RequestContext

pytestmark = pytest.mark.timeout(60)


@dataclass
class Allow:
    """A unit-test authorizer allowing exactly ``allowed``, recording what it was asked."""

    allowed: set[Op]
    asked: list[Action] = field(default_factory=list)

    def authorize(
        self, context: RequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]:
        self.asked += actions
        return [
            AuthorizationResult.ALLOWED
            if a.operation in self.allowed
            else AuthorizationResult.DENIED
            for a in actions
        ]


@dataclass
class Services:
    authz: RequestAuthorizer = field(default_factory=RequestAuthorizer)


def with_authorizer(allow: Allow) -> Services:
    return Services(RequestAuthorizer(allow))  # type: ignore[arg-type]


def bits(*ops: Op) -> int:
    return sum(1 << int(op) for op in ops)


def test_without_an_authorizer_every_supported_operation() -> None:
    got = authorized_operations(Services(), ResourceType.TOPIC, "t")  # type: ignore[arg-type]
    assert got == bits(
        Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
        Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
    )  # fmt: skip
    assert got == 3576  # Kafka's value for a topic with no authorizer


def test_with_an_authorizer_only_what_it_allows_and_no_audit_line() -> None:
    allow = Allow({Op.READ, Op.DESCRIBE})
    services = with_authorizer(allow)
    got = authorized_operations(services, ResourceType.GROUP, "g")  # type: ignore[arg-type]
    assert got == bits(Op.READ, Op.DESCRIBE)
    assert all(not a.log_if_denied and not a.log_if_allowed for a in allow.asked)
    assert {a.resource.name for a in allow.asked} == {"g"}


def test_the_cluster_needs_describe_and_unasked_is_omitted() -> None:
    services = with_authorizer(Allow({Op.ALTER}))
    assert authorized_operations(services, ResourceType.CLUSTER, "kafka-cluster") == 0  # type: ignore[arg-type]
    assert (
        authorized_operations(Services(), ResourceType.CLUSTER, "c", requested=False)  # type: ignore[arg-type]
        == OMITTED
    )


def test_librdkafka_reads_a_groups_operations(tmp_path: Path) -> None:
    with EmbeddedBroker({"log.dirs": str(tmp_path), "group.initial.rebalance.delay.ms": "0"}) as b:
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ops"})
        consumer.subscribe(["ops-topic"])
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        deadline = time.monotonic() + 30
        while True:
            consumer.poll(0.2)
            group = admin.describe_consumer_groups(["ops"], include_authorized_operations=True)[
                "ops"
            ].result(10)
            if group.members or time.monotonic() > deadline:
                break
        consumer.close()
    assert set(group.authorized_operations) == {
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
