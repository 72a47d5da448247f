"""Real clients on compacted topics, shared by the cleaner's tests (broker, remote tier,
cluster): produce keyed changes and remember each key's last one; read a partition back
from offset 0 with kafka-python or librdkafka, over offset gaps."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

Record = tuple[int, bytes, bytes | None]  # offset, key, value
Last = dict[bytes, tuple[int, bytes | None]]  # key -> its last (offset, value)


def produce_changes(
    bootstrap: str,
    topic: str,
    count: int,
    change: Callable[[int], tuple[bytes, bytes | None]],
    **config: object,
) -> Last:
    """Produce ``change(i)`` (key, value) for i in range(count), idempotently, in small
    batches; returns each key's last acknowledged (offset, value)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 4096,
            **config,
        }
    )
    last: Last = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        last[msg.key()] = (msg.offset(), msg.value())  # type: ignore[attr-defined]

    for i in range(count):
        key, value = change(i)
        producer.produce(topic, key=key, value=value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    return last


def read_with_kafka_python(bootstrap: str, topic: str) -> list[Record]:
    """Partition 0 from its earliest offset to its end, with kafka-python."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=4000
    )
    tp = KTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    out = []
    for message in consumer:
        out.append((message.offset, message.key, message.value))
        if message.offset >= end - 1:
            break
    consumer.close()
    return out


def read_with_librdkafka(bootstrap: str, topic: str) -> list[Record]:
    """Partition 0 from offset 0 to its end, with confluent-kafka (CRCs checked)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    consumer.assign([CTopicPartition(topic, 0, 0)])
    _, end = consumer.get_watermark_offsets(CTopicPartition(topic, 0), timeout=10)
    out = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        assert message.error() is None, message.error()
        out.append((message.offset(), message.key(), message.value()))
        if message.offset() >= end - 1:
            break
    consumer.close()
    return out


def assert_compacted(records: list[Record], last: Last, at_most: float) -> None:
    """Offsets rise; every key's last record (tombstones included) is there at its
    offset; and at most ``at_most`` records are left (the log was cleaned)."""
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
    assert {key: (offset, value) for offset, key, value in records} == last
    assert len(records) <= at_most, f"{len(records)} records: not cleaned"
