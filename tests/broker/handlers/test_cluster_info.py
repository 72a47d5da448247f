"""DescribeCluster and DescribeTopicPartitions (handlers/cluster_info.py) on an embedded
broker: librdkafka's describe_cluster with KIP-430 operations, the KRaft-controllers
endpoint refused, and DescribeTopicPartitions paged by its cursor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

from tests.raw_client import RawClient, request
from tierlog.broker.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    data = tmp_path_factory.mktemp("cluster-info")
    with EmbeddedBroker({"log.dirs": str(Path(data))}) as embedded:
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
        topics = [NewTopic("alpha", 3, 1), NewTopic("beta", 2, 1), NewTopic("gamma", 4, 1)]
        for future in admin.create_topics(topics).values():
            future.result(10)
        yield embedded


def test_librdkafka_describes_the_cluster_with_its_operations(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert broker.broker is not None and broker.broker.coordinator is not None
    assert described.cluster_id == broker.broker.coordinator.cluster_id
    assert described.controller.id == 0
    assert [(n.id, n.host, n.port) for n in described.nodes] == [(0, "127.0.0.1", broker.port)]
    # No authorizer: every operation Kafka supports on the cluster (KIP-430).
    assert set(described.authorized_operations) == {
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }
    plain = admin.describe_cluster().result(10)
    assert plain.authorized_operations is None  # not asked: not computed


def test_controllers_endpoint_is_refused(broker: EmbeddedBroker) -> None:
    raw = RawClient(broker.port)
    answer = raw.call(
        request(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2})
    )
    assert answer.error_code == 115  # UNSUPPORTED_ENDPOINT_TYPE
    assert answer.brokers == ()


def pages(raw: RawClient, topics: list[str], limit: int) -> list[list[tuple[str, list[int]]]]:
    out = []
    cursor: dict[str, Any] | None = None
    while True:
        answer = raw.call(
            request(
                75,
                0,
                {
                    "topics": [{"name": t} for t in topics],
                    "response_partition_limit": limit,
                    "cursor": cursor,
                },
            )
        )
        out.append([(t.name, [p.partition_index for p in t.partitions]) for t in answer.topics])
        if answer.next_cursor is None:
            return out
        cursor = {
            "topic_name": answer.next_cursor.topic_name,
            "partition_index": answer.next_cursor.partition_index,
        }


def test_describe_topic_partitions_pages_by_cursor(broker: EmbeddedBroker) -> None:
    raw = RawClient(broker.port)
    assert pages(raw, [], 4) == [
        [("alpha", [0, 1, 2]), ("beta", [0])],
        [("beta", [1]), ("gamma", [0, 1, 2])],
        [("gamma", [3])],
    ]
    assert pages(raw, ["gamma", "alpha"], 100) == [[("alpha", [0, 1, 2]), ("gamma", [0, 1, 2, 3])]]
    # A topic that does not exist, and a cursor on a topic not asked for.
    missing = raw.call(
        request(75, 0, {"topics": [{"name": "nope"}], "response_partition_limit": 5})
    )
    assert [(t.name, t.error_code) for t in missing.topics] == [("nope", 3)]
    bad = raw.call(
        request(
            75,
            0,
            {
                "topics": [{"name": "alpha"}],
                "response_partition_limit": 5,
                "cursor": {"topic_name": "beta", "partition_index": 0},
            },
        )
    )
    assert [(t.name, t.error_code) for t in bad.topics] == [("alpha", 42)]


def test_librdkafka_describes_topics_with_operations(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.describe_topics(TopicCollection(["alpha"]), include_authorized_operations=True)
    alpha = futures["alpha"].result(10)
    assert [p.id for p in alpha.partitions] == [0, 1, 2]
    assert AclOperation.READ in alpha.authorized_operations
