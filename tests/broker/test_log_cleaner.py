"""A real broker cleans a compacted topic while it serves, and real clients read the
cleaned log: every key's last value, in order, at its original offset; tombstones kept
within delete.retention.ms; offsets with gaps are not an error."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compacted_topics import (
    Last,
    Record,
    assert_compacted,
    produce_changes,
    read_with_kafka_python,
    read_with_librdkafka,
)

from .harness import BrokerProcess
from .test_integrity_scrubber import metric

KEYS = 150
MESSAGES = 6000


def _create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config=configs)])
    futures[topic].result(timeout=20)


def _produce(bootstrap: str, topic: str) -> Last:
    """MESSAGES records over KEYS keys, then the first ten keys deleted."""
    last = produce_changes(
        bootstrap,
        topic,
        MESSAGES,
        lambda i: (b"user-%d" % (i % KEYS), b"email-%d@example.com" % i),
        **{"compression.type": "lz4"},
    )
    last.update(produce_changes(bootstrap, topic, 10, lambda n: (b"user-%d" % n, None)))
    return last


def _check(records: list[Record], last: Last) -> None:
    assert_compacted(records, last, at_most=MESSAGES / 4)


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
            records = read_with_kafka_python(broker.bootstrap, topic)
            if len(records) < MESSAGES / 4 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        _check(records, last)
        _check(read_with_librdkafka(broker.bootstrap, topic), last)
        port = int(re.findall(r"metrics on http://[^:]+:(\d+)/", broker.log_text())[-1])
        assert metric(port, "tierlog_cleaner_passes_total") >= 1
        assert metric(port, "tierlog_cleaner_removed_records_total") > MESSAGES / 2
        assert metric(port, "kafka_log_logcleaner_cleaner_recopy_percent") < 100
        assert metric(port, "kafka_log_logcleanermanager_uncleanable_partitions_count") == 0
        assert broker.stop() == 0
        checkpoint = (tmp_path / "data" / "cleaner-offset-checkpoint").read_text().split("\n")
        assert [line for line in checkpoint if line.startswith(f"{topic} 0 ")]
        broker.start()
        _check(read_with_librdkafka(broker.bootstrap, topic), last)
        assert "cleaned: offsets" in broker.log_text()
    finally:
        broker.stop()
