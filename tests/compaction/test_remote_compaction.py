"""Compacted topics on the remote tier: a real broker offloads a compacted topic's closed
segments, cleans them in object storage (new segments committed in one manifest commit,
the replaced objects deleted after the delay), and real clients replay one compacted log
across both tiers: every key's last value, in order, at its original offset."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from tests.broker.harness import BrokerProcess

KEYS = 60
MESSAGES = 4000
TOPIC = "profiles"


def _manifest(data: Path) -> dict:
    path = data / "remote" / f"{TOPIC}-0" / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {"segments": []}


def _produce(bootstrap: str) -> dict[bytes, tuple[int, bytes | None]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "remote.storage.enable": "true",
        "local.retention.bytes": "30000",
        "segment.bytes": "16384",
        "min.cleanable.dirty.ratio": "0.01",
    }
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=config)])[TOPIC].result(timeout=10)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 2,
            "batch.size": 4096,
            "enable.idempotence": True,
        }
    )
    last: dict[bytes, tuple[int, bytes | None]] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        last[msg.key()] = (msg.offset(), msg.value())  # type: ignore[attr-defined]

    for i in range(MESSAGES):
        value = None if i % 97 == 0 else b"email-%d@example.com" % i
        producer.produce(TOPIC, key=b"user-%d" % (i % KEYS), value=value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    return last


def _replay_kafka_python(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=4000)
    tp = KTopicPartition(TOPIC, 0)
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


def _replay_librdkafka(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "replay", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    _, end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
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
    latest = {key: (offset, value) for offset, key, value in records}
    assert latest == last
    assert len(records) < MESSAGES / 2, "the remote part was cleaned"


@pytest.mark.timeout(180)
def test_a_compacted_topic_is_cleaned_in_object_storage(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(
        data,
        {
            "remote.log.manager.task.interval.ms": "200",
            "log.retention.check.interval.ms": "200",
            "log.segment.delete.delay.ms": "1000",
            "log.cleaner.backoff.ms": "100",
        },
    ).start()
    try:
        last = _produce(broker.bootstrap)
        deadline = time.monotonic() + 90

        def local_start() -> int:
            return min(int(p.stem) for p in (data / f"{TOPIC}-0").glob("*.log"))

        # Cleaned in object storage, and part of the log only there (local retention).
        while "remote segments cleaned" not in broker.log_text() or local_start() == 0:
            assert time.monotonic() < deadline, broker.log_text()[-3000:]
            time.sleep(0.3)
        # Until the passes stop (nothing new to upload or clean): reads below are then not
        # racing a replacement whose old objects go after the delay.
        passes = -1
        while passes != broker.log_text().count("remote segments cleaned"):
            assert time.monotonic() < deadline, broker.log_text()[-3000:]
            passes = broker.log_text().count("remote segments cleaned")
            time.sleep(2)
        _check(_replay_kafka_python(broker.bootstrap), last)
        _check(_replay_librdkafka(broker.bootstrap), last)
        # The replaced segments' objects go once the delay has passed; every object left
        # belongs to a committed segment.
        deadline = time.monotonic() + 30
        while True:
            segments = _manifest(data)["segments"]
            ids = {s["segment_id"] for s in segments}
            names = [p.name for p in (data / "remote" / f"{TOPIC}-0").iterdir()]
            strays = [n for n in names if n != "manifest.json" and n[21:57] not in ids]
            if not strays or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert strays == []
        assert broker.stop() == 0
        broker.start()
        _check(_replay_librdkafka(broker.bootstrap), last)
    finally:
        broker.stop()
