"""Real Kafka clients (kafka-python, confluent-kafka) against a real tierlog broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from tests.broker.harness import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=configs)]).values():
        future.result(timeout=10)


def consume_all(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 20.0
) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) of every message, read with assign() from 0."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[int, int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_idempotent_producer_every_codec(broker: BrokerProcess, codec: str) -> None:
    create_topic(broker.bootstrap, "events", partitions=3)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 5,
            "acks": "all",
        }
    )
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i in range(3000):
        producer.produce(
            "events", key=f"user-{i % 17}".encode(), value=b"%06d" % i, on_delivery=on_delivery
        )
    assert producer.flush(20) == 0
    assert len(delivered) == 3000
    got = consume_all(broker.bootstrap, "events", 3, 3000)
    assert len(got) == 3000
    # Offsets are dense per partition and every value arrived exactly once.
    for p in range(3):
        offsets = [o for part, o, _, _ in got if part == p]
        assert offsets == list(range(len(offsets)))
    assert sorted(v for *_, v in got) == [b"%06d" % i for i in range(3000)]
    # Per key, values keep their produce order (one key -> one partition).
    by_key: dict[bytes, list[bytes]] = {}
    for _, _, key, value in sorted(got, key=lambda m: (m[0], m[1])):
        assert key is not None and value is not None
        by_key.setdefault(key, []).append(value)
    for values in by_key.values():
        assert values == sorted(values)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_producer_and_consumer_every_codec(broker: BrokerProcess, codec: str) -> None:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        compression_type=None if codec == "none" else codec,
        enable_idempotence=True,
        acks="all",
        linger_ms=2,
    )
    for i in range(500):
        producer.send("kp-events", key=b"k%d" % (i % 3), value=b"value-%d" % i)
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(
        "kp-events",
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        group_id=None,
    )
    values = []
    for message in consumer:  # stops at 500, or after 10 s without a message
        values.append(message.value)
        if len(values) == 500:
            break
    consumer.close()
    assert sorted(values) == sorted(b"value-%d" % i for i in range(500))


def test_seek_and_replay_from_any_offset(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "replay")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1})
    for i in range(200):
        producer.produce("replay", value=b"%d" % i)
    producer.flush(10)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        for start in (150, 0, 199, 73):
            consumer.assign([TopicPartition("replay", 0, start)])
            msg = None
            deadline = time.monotonic() + 10
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
            assert msg is not None and msg.error() is None
            assert (msg.offset(), msg.value()) == (start, b"%d" % start)
    finally:
        consumer.close()


def test_fetch_long_poll_returns_when_data_arrives(broker: BrokerProcess) -> None:
    """A consumer waiting at the log end gets a message well before fetch.wait.max.ms."""
    create_topic(broker.bootstrap, "poll")
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "fetch.wait.max.ms": 5000,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("poll", 0, 0)])
    consumer.poll(1.0)  # the consumer is now parked in a long poll at offset 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    started = time.monotonic()
    producer.produce("poll", value=b"wake up")
    producer.flush(5)
    msg = None
    while msg is None and time.monotonic() - started < 10:
        msg = consumer.poll(0.1)
    waited = time.monotonic() - started
    consumer.close()
    assert msg is not None and msg.value() == b"wake up"
    assert waited < 2.5, f"long poll did not wake on append (took {waited:.2f}s)"


def test_watermarks_and_offsets_for_times(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "times")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        producer.produce("times", value=b"%d" % i, timestamp=base + i * 1000)
        producer.flush(5)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("times", 0), timeout=10) == (0, 10)
        found = consumer.offsets_for_times([TopicPartition("times", 0, base + 4500)], timeout=10)
        assert found[0].offset == 5
        past_end = consumer.offsets_for_times(
            [TopicPartition("times", 0, base + 99_000)], timeout=10
        )
        assert past_end[0].offset == -1  # no such record: the log end (-1 = "latest")
    finally:
        consumer.close()


def test_message_too_large_is_an_error_not_a_crash(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "small", **{"max.message.bytes": "2000"})
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 0,
            "message.max.bytes": 100_000,
            "retries": 0,
        }
    )
    errors: list[KafkaError] = []
    producer.produce("small", value=b"x" * 10_000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)  # its own batch: the next message must not share it
    producer.produce("small", value=b"ok", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert errors[1] is None  # the broker kept serving
