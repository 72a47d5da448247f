"""Partition limits (issue 20, item 8): a request creates at most 10,000 partitions (Kafka
4's cap), a broker holds at most what ``max.broker.partitions`` and its file descriptors
allow, and a large creation does not stop the broker answering others. Real broker
processes, raw CreateTopics/CreatePartitions (kio) and confluent-kafka clients."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from tests.broker.harness import BrokerProcess
from tierlog.broker.coordination.api import TopicMetadata
from tierlog.broker.replication.partition_limits import (
    RESERVED_FDS,
    PartitionLimitError,
    PartitionLimits,
    check_request,
)
from tierlog.client.connection import BrokerConnection
from tierlog.local.open_files import FDS_PER_PARTITION
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.kio_build import build

pytestmark = pytest.mark.timeout(300)


def call(port: int, api_key: int, version: int, body: dict[str, Any], timeout: float) -> Any:
    connection = BrokerConnection("127.0.0.1", port, timeout=timeout)
    try:
        return connection.call(build(load_request_schema(api_key, version), body))
    finally:
        connection.close()


def create_topics(port: int, topics: list[tuple[str, int]], timeout: float = 120) -> Any:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": n,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for name, n in topics
        ],
        "timeout_ms": 60_000,
        "validate_only": False,
    }
    return call(port, 19, 7, body, timeout)


def codes(answer: Any) -> list[tuple[str, int]]:
    return [(t.name, int(t.error_code)) for t in answer.topics]


def produce_works(bootstrap: str, topic: str) -> bool:
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000})
    delivered: list[object] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _m: delivered.append(err))
    producer.flush(15)
    return delivered == [None]


def test_a_million_partitions_are_refused_at_once(tmp_path: Path) -> None:
    """A 1,000,000-partition CreateTopics was accepted: the broker answered nobody for
    56 s and grew to 1.2 GB. Now the request is refused before anything is placed, every
    topic of it with Kafka 4's POLICY_VIOLATION and message; so is CreatePartitions."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        began = time.monotonic()
        answer = create_topics(broker.port, [("huge", 1_000_000), ("small", 1)], timeout=30)
        took = time.monotonic() - began
        assert codes(answer) == [("huge", 44), ("small", 44)]  # POLICY_VIOLATION
        assert answer.topics[0].error_message == (
            "Excessively large number of partitions per request."
        )
        assert took < 5, f"refusing took {took:.1f} s"
        assert codes(create_topics(broker.port, [("small", 1)])) == [("small", 0)]
        grow = {
            "topics": [{"name": "small", "count": 1_000_001, "assignments": None}],
            "timeout": 30_000,
            "validate_only": False,
        }
        result = call(broker.port, 37, 3, grow, timeout=30).results[0]
        assert int(result.error_code) == ErrorCode.policy_violation
        assert produce_works(broker.bootstrap, "small")
    finally:
        broker.stop()


def test_creations_past_the_file_descriptor_budget_are_refused(tmp_path: Path) -> None:
    """A 10,000-partition CreateTopics ran the broker out of descriptors at partition
    3,998: then produce failed, DeleteTopics failed, and it did not start again. Under
    ulimit -n RESERVED_FDS + 404 * FDS_PER_PARTITION (+ less than one partition's more)
    the broker has room for (ulimit -n - RESERVED_FDS) // FDS_PER_PARTITION = 404
    partitions: a creation past that is refused, naming the limit, and the broker keeps
    working."""
    open_files = RESERVED_FDS + 404 * FDS_PER_PARTITION + FDS_PER_PARTITION - 1
    broker = BrokerProcess(tmp_path / "data", fd_limit=open_files).start()
    try:
        assert codes(create_topics(broker.port, [("kept", 4)])) == [("kept", 0)]
        answer = create_topics(broker.port, [("too-many", 10_000)])
        assert codes(answer) == [("too-many", 44)]
        assert "file descriptor limit" in answer.topics[0].error_message
        assert "404 partitions" in answer.topics[0].error_message
        # Room for 400 more: what fits is created; one more than fits is refused.
        assert codes(create_topics(broker.port, [("fits", 399), ("over", 2)])) == [
            ("fits", 0),
            ("over", 44),
        ]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        future = admin.create_partitions([NewPartitions("kept", 6)])["kept"]
        with pytest.raises(Exception, match=r"POLICY_VIOLATION|file descriptor"):
            future.result(30)
        assert produce_works(broker.bootstrap, "kept")
        admin.delete_topics(["fits"])["fits"].result(60)
        assert codes(create_topics(broker.port, [("after", 2)])) == [("after", 0)]
        assert broker.stop() == 0
        broker.start()
        assert produce_works(broker.bootstrap, "after")
    finally:
        broker.stop()


def test_max_broker_partitions_counts_a_requests_topics_together(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"max.broker.partitions": "10"}).start()
    try:
        assert codes(create_topics(broker.port, [("a", 4), ("b", 4), ("c", 4)])) == [
            ("a", 0),
            ("b", 0),
            ("c", 44),
        ]
        answer = create_topics(broker.port, [("d", 3)])
        assert "max.broker.partitions" in answer.topics[0].error_message
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions("a", 6)])["a"].result(30)  # 10 in all
        with pytest.raises(Exception, match=r"POLICY_VIOLATION|max\.broker\.partitions"):
            admin.create_partitions([NewPartitions("b", 5)])["b"].result(30)
        with pytest.raises(Exception, match=r"POLICY_VIOLATION|max\.broker\.partitions"):
            admin.create_topics([NewTopic("e", 1, 1)])["e"].result(30)
    finally:
        broker.stop()


def test_a_large_creation_leaves_other_clients_answered(tmp_path: Path) -> None:
    """Hosting a created topic's partitions (files, fsyncs) ran in one go on the event
    loop: 1,000 partitions held it for seconds, every other client waiting. Now they are
    hosted a slice per turn of the loop; an ApiVersions on another connection every 20 ms
    is answered meanwhile."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        answers: list[Any] = []
        creator = threading.Thread(
            target=lambda: answers.append(create_topics(broker.port, [("wide", 1000)]))
        )
        request = build(
            ApiVersionsRequest, {"client_software_name": "t", "client_software_version": "1"}
        )
        ping = BrokerConnection("127.0.0.1", broker.port, timeout=60)
        worst = 0.0
        creator.start()
        try:
            while creator.is_alive():
                began = time.monotonic()
                ping.call(request)
                worst = max(worst, time.monotonic() - began)
                time.sleep(0.02)
        finally:
            ping.close()
        creator.join()
        assert codes(answers[0]) == [("wide", 0)]
        assert worst < 1.0, f"another client waited {worst:.2f} s"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert len(admin.list_topics("wide", timeout=30).topics["wide"].partitions) == 1000
        assert produce_works(broker.bootstrap, "wide")
    finally:
        broker.stop()


# -- the counting, without a broker --------------------------------------------------------


def topic(name: str, replicas: dict[int, list[int]]) -> TopicMetadata:
    import uuid

    return TopicMetadata(name, uuid.uuid4(), replicas)


def test_counts_replicas_per_broker_and_holds_what_is_in_flight() -> None:
    limits = PartitionLimits(max_broker_partitions=4, max_partitions=100, open_files=1 << 20)
    existing = {"t": topic("t", {0: [1, 2], 1: [2, 3]})}
    count = limits.count(existing)
    assert count.per_broker == Counter({2: 2, 1: 1, 3: 1})
    count.add("u", {0: [2, 1], 1: [2, 3]})  # broker 2 at 4: its limit
    with pytest.raises(PartitionLimitError, match="on broker 2, more than the 4"):
        count.add("v", {0: [2]})
    count.add("w", {0: [1]})
    with count.held():  # another request sees what this one is creating
        other = limits.count(existing)
        assert other.per_broker[2] == 4
        with pytest.raises(PartitionLimitError):
            other.add("x", {0: [2]})
    assert limits.count(existing).per_broker[2] == 2  # released
    check_request(10_000)
    with pytest.raises(PartitionLimitError, match="Excessively large"):
        check_request(10_001)


def test_the_file_descriptor_budget_caps_the_limit() -> None:
    limits = PartitionLimits(10**9, 10**9, open_files=20_000)
    assert limits.per_broker == (20_000 - RESERVED_FDS) // FDS_PER_PARTITION
    assert "ulimit -n 20000" in limits.why
    assert PartitionLimits(100, 10**9, open_files=20_000).why == "max.broker.partitions"
    cluster = PartitionLimits(10**9, 3, open_files=1 << 20).count({})
    cluster.add("a", {0: [1], 1: [1]})
    with pytest.raises(PartitionLimitError, match=r"max\.partitions 3"):
        cluster.add("b", {0: [2], 1: [2]})
