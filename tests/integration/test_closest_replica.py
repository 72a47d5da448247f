"""KIP-392, fetch from the closest replica, with real broker processes, a real ZooKeeper
and librdkafka: with ``replica.selector.class`` set to Kafka's RackAwareReplicaSelector,
a consumer with ``client.rack`` reads from the follower in its rack (librdkafka's
statistics name the broker it fetches from), gets every record once and in order, and a
consumer without a rack stays on the leader."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tests.raw_client import RawClient, fetch_body, request
from tierlog.protocol import ApiKey

pytestmark = pytest.mark.timeout(120)

TOPIC = "nearby"
RECORDS = 500
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
NOT_LEADER_OR_FOLLOWER = 6


def consume(bootstrap: str, rack: str | None) -> tuple[list[bytes], set[int]]:
    """All records, and the brokers librdkafka fetched the partition from."""
    fetched_from: set[int] = set()

    def on_stats(text: str) -> None:
        partition = json.loads(text).get("topics", {}).get(TOPIC, {}).get("partitions", {})
        broker = partition.get("0", {}).get("broker", -1)
        if broker >= 0:
            fetched_from.add(broker)

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"nearby-{rack}",
        "statistics.interval.ms": 200,
        "stats_cb": on_stats,
        "fetch.wait.max.ms": 100,
    }
    if rack is not None:
        config["client.rack"] = rack
    consumer = Consumer(config)
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        # Past the last record for a while, so the statistics see where fetches settle.
        settle_until = None
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if len(values) >= RECORDS and settle_until is None:
                settle_until = time.monotonic() + 1.5
            if settle_until is not None and time.monotonic() > settle_until:
                break
    finally:
        consumer.close()
    return values, fetched_from


def test_a_consumer_reads_from_the_replica_in_its_rack(tmp_path: Path, zk_connect: str) -> None:
    cluster = ProcessCluster(tmp_path, zk_connect, 3, {"replica.selector.class": RACK_AWARE})
    for n, broker in enumerate(cluster.brokers):
        broker.overrides["broker.rack"] = f"rack-{n}"
    cluster.start()
    try:
        admin = cluster.admin()
        new = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[0, 1, 2]])
        admin.create_topics([new])[TOPIC].result(30)
        cluster.wait_for_full_isr(TOPIC, 1, 3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"%05d" % i)
        assert producer.flush(30) == 0
        expected = [b"%05d" % i for i in range(RECORDS)]
        assert cluster.leader_of(TOPIC, 0) == 0

        values, fetched_from = consume(cluster.bootstrap, "rack-2")
        assert values == expected
        assert 2 in fetched_from, fetched_from

        values, fetched_from = consume(cluster.bootstrap, None)
        assert values == expected
        assert fetched_from == {0}, fetched_from

        # Sent to a follower directly: Fetch v11+ is served there, older versions are for
        # the leader only (Kafka's rule: a client with stale metadata learns at once).
        client = RawClient(cluster.brokers[2].port)
        try:
            for version, error in ((10, NOT_LEADER_OR_FOLLOWER), (11, 0), (12, 0)):
                answer = client.call(request(ApiKey.FETCH, version, fetch_body(TOPIC, {0: 0})))
                (p,) = answer.responses[0].partitions
                assert p.error_code == error, (version, p.error_code)
                assert bool(p.records) == (error == 0)
        finally:
            client.close()
    finally:
        cluster.stop()
