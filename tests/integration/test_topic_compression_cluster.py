"""A zstd topic replicated on two broker processes over a real ZooKeeper: the leader
recompresses what producers send, and the follower stores the leader's bytes unchanged
(no recompression on replication, as in Kafka): both replicas' segment files are equal."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tierlog.records.header import Attr, Compression, iter_batches

TOPIC = "zstd-replicated"


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 2)
    try:
        yield c.start()
    finally:
        c.kill()


def test_the_follower_stores_the_leaders_recompressed_bytes(cluster: ProcessCluster) -> None:
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, 1, 2, config={"compression.type": "zstd"})])[TOPIC].result(
        30
    )
    cluster.wait_for_full_isr(TOPIC, 1, 2)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "compression.type": "gzip", "acks": "all"}
    )
    for i in range(500):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"value %d " % i * 10)
    assert producer.flush(30) == 0
    segments = [b.data_dir / f"{TOPIC}-0" / "00000000000000000000.log" for b in cluster.brokers]
    leader = cluster.leader_of(TOPIC, 0)
    expected = segments[leader].read_bytes()
    follower = segments[1 - leader]
    # acks=all answered once the follower had fetched the batches; its file may lag the
    # write by a moment more.
    deadline = time.monotonic() + 30
    while follower.read_bytes() != expected:
        assert time.monotonic() < deadline, "the follower's segment never matched the leader's"
        time.sleep(0.2)
    codecs = {h.attributes & Attr.COMPRESSION_MASK for _, h in iter_batches(expected)}
    assert codecs == {Compression.ZSTD}
    assert sum(h.record_count for _, h in iter_batches(expected)) == 500
