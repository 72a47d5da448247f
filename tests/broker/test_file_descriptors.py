"""Issue 20, item 8 (file descriptors) against a real broker and real clients: one
descriptor per partition in use, and a broker with more partitions on disk than it has
descriptors starts and serves every one of them."""

from __future__ import annotations

import re
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tierlog.local.open_files import FDS_PER_PARTITION


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=120)


def produce_to_each(bootstrap: str, topic: str, partitions: int, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    failed: list[object] = []
    for partition in range(partitions):
        producer.produce(
            topic,
            value=value + b"-%d" % partition,
            partition=partition,
            on_delivery=lambda err, _msg: failed.append(err) if err else None,
        )
    assert producer.flush(120) == 0
    assert not failed, failed[:3]


def consume_each(bootstrap: str, topic: str, partitions: int, per_partition: int) -> dict:
    """Every partition's values, read with one consumer assigned to all of them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fds"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    wanted = partitions * per_partition
    got = 0
    deadline = time.monotonic() + 120
    try:
        while got < wanted and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            values[msg.partition()].append(msg.value())
            got += 1
    finally:
        consumer.close()
    return values


def test_a_partition_in_use_holds_one_file_descriptor(broker: BrokerProcess) -> None:
    """Before: five per partition (the .log, two index files and the duplicate each
    Python memory map keeps of its descriptor)."""
    create(broker.bootstrap, "warm", 1)
    produce_to_each(broker.bootstrap, "warm", 1, b"w")  # connections and threads settle
    before = broker.open_fds()
    create(broker.bootstrap, "many", 300)
    produce_to_each(broker.bootstrap, "many", 300, b"v")
    per_partition = (broker.open_fds() - before) / 300
    assert per_partition <= FDS_PER_PARTITION + 0.05, per_partition


def test_a_broker_with_more_partitions_than_descriptors_starts_and_serves_them(
    tmp_path: Path, broker_factory: type[BrokerProcess]
) -> None:
    """Before: the start failed with 'too many open files' once the partitions on disk
    needed more descriptors than the limit (5 each)."""
    partitions = 700
    broker = broker_factory(tmp_path / "data").start()
    create(broker.bootstrap, "wide", partitions)
    produce_to_each(broker.bootstrap, "wide", partitions, b"first")
    broker.stop()
    limited = broker_factory(tmp_path / "data", fd_limit=512, port=broker.port).start()
    found = re.search(
        r"WARNING .*: (\d+) partitions on disk need .* segments are opened on "
        r"first use",
        limited.log_text(),
    )
    assert found and int(found.group(1)) >= partitions, limited.log_text()[-3000:]
    assert limited.open_fds() < 512
    produce_to_each(limited.bootstrap, "wide", partitions, b"second")
    values = consume_each(limited.bootstrap, "wide", partitions, 2)
    assert values == {p: [b"first-%d" % p, b"second-%d" % p] for p in range(partitions)}, [
        p for p, v in values.items() if len(v) != 2
    ][:5]
    assert limited.open_fds() < 512
