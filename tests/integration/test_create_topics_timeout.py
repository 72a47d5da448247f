"""CreateTopics' ``timeout_ms`` in cluster mode, against a real broker process on a real
ZooKeeper: the broker waits that long for the new topic's leaders (Kafka's
DelayedCreatePartitions), answers REQUEST_TIMED_OUT past it, and the topic is created all
the same. Before, the wait was a fixed 30 s whatever the client asked, and its end answered
UNKNOWN_SERVER_ERROR: a loaded CI run creating 1,000 partitions failed that way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 1).start()
    try:
        yield c
    finally:
        c.kill()


def test_a_wait_shorter_than_the_election_answers_request_timed_out_and_creates_the_topic(
    cluster: ProcessCluster,
) -> None:
    admin = cluster.admin()
    # 1 ms: no ZooKeeper round trip to the controller and back is that fast.
    future = admin.create_topics([NewTopic("slow", 200, 1)], operation_timeout=0.001)["slow"]
    with pytest.raises(KafkaException) as raised:
        future.result(60)
    error = raised.value.args[0]
    assert error.code() == KafkaError.REQUEST_TIMED_OUT, error
    assert "is created" in error.str()

    def elected() -> bool:
        partitions = cluster.partitions("slow")
        return len(partitions) == 200 and all(p.leader == 0 for p in partitions.values())

    cluster.wait_until(elected, "the leaders of the topic's 200 partitions", 60)


def test_a_wait_long_enough_answers_success_with_the_leaders_elected(
    cluster: ProcessCluster,
) -> None:
    admin = cluster.admin()
    future = admin.create_topics(
        [NewTopic("waited", 50, 1)], operation_timeout=60, request_timeout=90
    )["waited"]
    assert future.result(90) is None
    # The answer came after the leaders were elected: this broker's metadata has them all.
    assert {p.leader for p in cluster.partitions("waited").values()} == {0}
    assert len(cluster.partitions("waited")) == 50
