"""Kafka's topic name collision rule in cluster mode: checked against the topics in
ZooKeeper at creation (as Kafka's ``AdminZkClient.validateTopicCreate`` does), so a
broker whose cache has not seen another broker's new topic yet still refuses the
colliding name; and end to end, CreateTopics through two brokers with a real client."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tierlog.broker.coordination.api import TopicCollisionError
from tierlog.broker.coordination.zk_client import ZkClient

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def zk_clients(zk_connect: str) -> Iterator[tuple[ZkClient, ZkClient]]:
    clients = (ZkClient(zk_connect, session_timeout_ms=6000), ZkClient(zk_connect))
    for client in clients:
        client.start()
    try:
        yield clients
    finally:
        for client in clients:
            client.stop()


def test_zookeeper_refuses_a_colliding_name_another_client_created(
    zk_clients: tuple[ZkClient, ZkClient],
) -> None:
    a, b = zk_clients
    a.topics.create("orders.eu", {0: [1]}, uuid.uuid4(), {})
    with pytest.raises(TopicCollisionError) as raised:
        b.topics.create("orders_eu", {0: [1]}, uuid.uuid4(), {})
    assert str(raised.value) == "Topic 'orders_eu' collides with existing topics: orders.eu"
    assert b.topics.get("orders_eu") is None and b.configs.topic("orders_eu") == {}
    b.topics.create("orders-eu", {0: [1]}, uuid.uuid4(), {})  # no '.' or '_': no collision
    assert sorted(b.topics.names()) == ["orders-eu", "orders.eu"]


def test_create_topics_through_another_broker_refuses_the_colliding_name(
    tmp_path: Path, zk_connect: str
) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, 2).start()
    try:
        first = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
        first.create_topics([NewTopic("clicks.raw", 1, 2)])["clicks.raw"].result(30)
        second = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
        future = second.create_topics([NewTopic("clicks_raw", 1, 2)])["clicks_raw"]
        with pytest.raises(KafkaException) as raised:
            future.result(30)
        error = raised.value.args[0]
        assert error.code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION, 17
        assert "collides with existing topics: clicks.raw" in error.str()
        assert "clicks_raw" not in second.list_topics(timeout=10).topics
    finally:
        cluster.kill()
