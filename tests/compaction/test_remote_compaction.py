"""Compacted topics on the remote tier: a real broker offloads a compacted topic's closed
segments, cleans them in object storage (new segments committed in one manifest commit,
the replaced objects deleted after the delay), and real clients replay one compacted log
across both tiers: every key's last value, in order, at its original offset."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tests.compacted_topics import (
    Last,
    Record,
    assert_compacted,
    produce_changes,
    read_with_kafka_python,
    read_with_librdkafka,
)
from tierlog.remote import manifest_json
from tierlog.remote.registry import open_store

KEYS = 60
MESSAGES = 4000
TOPIC = "profiles"


def _manifest(data: Path) -> dict:
    """The current manifest's JSON, read through the store (pointer, then version)."""
    store = open_store((data / "remote").as_uri())
    return json.loads(manifest_json.encode(store.read_manifest(TOPIC, 0)))


def _produce(bootstrap: str) -> Last:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "remote.storage.enable": "true",
        "local.retention.bytes": "30000",
        "segment.bytes": "16384",
        "min.cleanable.dirty.ratio": "0.01",
    }
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=config)])[TOPIC].result(timeout=10)
    return produce_changes(
        bootstrap,
        TOPIC,
        MESSAGES,
        lambda i: (
            b"user-%d" % (i % KEYS),
            None if i % 97 == 0 else b"email-%d@example.com" % i,
        ),
    )


def _check(records: list[Record], last: Last) -> None:
    assert_compacted(records, last, at_most=MESSAGES / 2)


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
        _check(read_with_kafka_python(broker.bootstrap, TOPIC), last)
        _check(read_with_librdkafka(broker.bootstrap, TOPIC), last)
        # The replaced segments' objects go once the delay has passed; every object left
        # belongs to a committed segment.
        deadline = time.monotonic() + 30
        while True:
            segments = _manifest(data)["segments"]
            ids = {s["segment_id"] for s in segments}
            names = [p.name for p in (data / "remote" / f"{TOPIC}-0").iterdir()]
            strays = [n for n in names if not n.startswith("manifest") and n[21:57] not in ids]
            if not strays or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert strays == []
        assert broker.stop() == 0
        broker.start()
        _check(read_with_librdkafka(broker.bootstrap, TOPIC), last)
    finally:
        broker.stop()
