"""zk_topics against a real ZooKeeper: creation with its configs in one multi, growth by
zkVersion, deletion requests and the controller's fenced deletion, and the admin requests
the controller completes. Each test runs in its own chroot."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.zk_clients import TOPIC_ID, ClientFactory, started_topic
from tierlog.broker.coordination import zk_data
from tierlog.broker.coordination.api import TopicExistsError, UnknownTopicError

pytestmark = pytest.mark.timeout(20)


def test_create_topic_twice_raises_and_configs_are_kept(new_client: ClientFactory) -> None:
    a, b = new_client(), new_client()
    a.topics.create("orders", {0: [1, 2]}, TOPIC_ID, {"retention.ms": "1000"})
    with pytest.raises(TopicExistsError):
        b.topics.create("orders", {0: [2]}, uuid.uuid4(), {"retention.ms": "5"})
    topic = b.topics.get("orders")
    assert topic is not None
    assert (topic.partitions, topic.topic_id) == ({0: [1, 2]}, TOPIC_ID)
    assert b.configs.topic("orders") == {"retention.ms": "1000"}
    assert b.topics.names() == ["orders"]
    assert b.topics.get("nope") is None and b.partition_states.get("nope", 0) is None


def test_partitions_are_added_keeping_the_topic_id(new_client: ClientFactory) -> None:
    a = new_client()
    a.topics.create("orders", {0: [1]}, TOPIC_ID, {})
    grown = a.topics.add_partitions("orders", {0: [1], 1: [2], 2: [1]})
    assert grown.topic_id == TOPIC_ID
    assert a.topics.get("orders") == grown
    with pytest.raises(ValueError):
        a.topics.add_partitions("orders", {0: [2], 1: [2], 2: [1], 3: [1]})
    with pytest.raises(UnknownTopicError):
        a.topics.add_partitions("nope", {0: [1]})


def test_topic_deletion_request_then_controller_deletes(new_client: ClientFactory) -> None:
    admin, controller = new_client(), new_client()
    lease = controller.controller.try_elect(1)
    assert lease is not None
    started_topic(admin, lease)
    admin.topics.create("kept", {0: [1]}, uuid.uuid4(), {})
    with pytest.raises(UnknownTopicError):
        admin.topics.request_deletion("nope")

    admin.topics.request_deletion("orders")
    admin.topics.request_deletion("orders")  # asking twice is harmless
    assert controller.topics.pending_deletions() == ["orders"]
    controller.topics.delete(lease, "orders")

    assert controller.topics.names() == ["kept"]
    assert controller.topics.pending_deletions() == []
    assert controller.configs.topic("orders") == {}
    assert controller.partition_states.of_topic("orders") == {}
    assert not controller.kazoo.exists(zk_data.topic_config_path("orders"))
    controller.topics.delete(lease, "orders")  # already gone: nothing to do
    admin.topics.create("orders", {0: [1]}, uuid.uuid4(), {})  # the name is free again


def test_create_topic_refused_while_deletion_pending(new_client: ClientFactory) -> None:
    a = new_client()
    a.topics.create("orders", {0: [1]}, TOPIC_ID, {})
    a.topics.request_deletion("orders")
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        a.topics.create("orders", {0: [1]}, TOPIC_ID, {})


def test_admin_request_znodes_are_deleted_by_the_controller(new_client: ClientFactory) -> None:
    a = new_client()
    lease = a.controller.try_elect(1)
    assert lease is not None
    a.kazoo.create(zk_data.REASSIGN_PARTITIONS, zk_data.encode_reassignment({("t", 0): [1]}))
    a.topics.delete_reassign_partitions(lease)
    a.topics.delete_reassign_partitions(lease)  # absent: nothing to do
    assert a.kazoo.exists(zk_data.REASSIGN_PARTITIONS) is None
