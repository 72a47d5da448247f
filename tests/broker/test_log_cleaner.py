"""A real broker cleans a compacted topic while it serves, and real clients read the
cleaned log: every key's last value, in order, at its original offset; tombstones kept
within delete.retention.ms; offsets with gaps are not an error."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from .harness import BrokerProcess
from .test_integrity_scrubber import metric

KEYS = 150
MESSAGES = 6000


def _create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=configs)])
    futures[topic].result(timeout=20)


def _produce(bootstrap: str, topic: str) -> dict[bytes, tuple[int, bytes | None]]:
    """MESSAGES records over KEYS keys, the last ten keys deleted at the end; returns each
    key's last (offset, value)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
            "batch.size": 4096,
        }
    )
    last: dict[bytes, tuple[int, bytes | None]] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        last[msg.key()] = (msg.offset(), msg.value())  # type: ignore[attr-defined]

    for i in range(MESSAGES):
        key = b"user-%d" % (i % KEYS)
        producer.produce(topic, key=key, value=b"email-%d@example.com" % i, on_delivery=delivered)
        producer.poll(0)
    producer.flush(30)
    for n in range(10):
        producer.produce(topic, key=b"user-%d" % n, value=None, on_delivery=delivered)
    producer.flush(30)
    return last


def _read_with_kafka_python(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    tp = TopicPartition(topic, 0)
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


def _read_with_librdkafka(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    from confluent_kafka import TopicPartition as CTopicPartition

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


def _check(records: list[tuple[int, bytes, bytes | None]], last: dict) -> None:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets))
    assert len(records) < MESSAGES / 4, "the log was cleaned"
    latest = {}
    for offset, key, value in records:
        latest[key] = (offset, value)
    assert latest == last  # every key's last record (tombstones included), same offset


@pytest.mark.timeout(180)
def test_clients_read_a_log_the_broker_cleaned(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data", {"log.cleaner.backoff.ms": "100", "metrics.http.port": "0"}
    ).start()
    try:
        topic = "users"
        _create(
            broker.bootstrap,
            topic,
            **{
                "cleanup.policy": "compact",
                "segment.bytes": "16384",
                "min.cleanable.dirty.ratio": "0.01",
            },
        )
        last = _produce(broker.bootstrap, topic)
        deadline = time.monotonic() + 60
        while True:
            records = _read_with_kafka_python(broker.bootstrap, topic)
            if len(records) < MESSAGES / 4 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        _check(records, last)
        _check(_read_with_librdkafka(broker.bootstrap, topic), last)
        port = int(re.findall(r"metrics on http://[^:]+:(\d+)/", broker.log_text())[-1])
        assert metric(port, "tierlog_cleaner_passes_total") >= 1
        assert metric(port, "tierlog_cleaner_removed_records_total") > MESSAGES / 2
        assert metric(port, "kafka_log_logcleaner_cleaner_recopy_percent") < 100
        assert metric(port, "kafka_log_logcleanermanager_uncleanable_partitions_count") == 0
        assert broker.stop() == 0
        checkpoint = (tmp_path / "data" / "cleaner-offset-checkpoint").read_text().split("\n")
        assert [line for line in checkpoint if line.startswith(f"{topic} 0 ")]
        broker.start()
        _check(_read_with_librdkafka(broker.bootstrap, topic), last)
        assert "cleaned: offsets" in broker.log_text()
    finally:
        broker.stop()
