"""Shared by the pipeline tests: a partly offloaded topic on a real broker (one per test
module), the topic as a plain Kafka consumer reads it, and a Delta table's rows in the
same shape for comparing the two."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.tiered_data import TieredTopic, tiered_topic

Row = tuple[int, int, bytes | None, bytes, int]  # partition, offset, key, value, timestamp ms


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredTopic]:
    topic = tiered_topic(tmp_path_factory.mktemp("pipelines") / "broker", count=4000)
    try:
        yield topic
    finally:
        topic.broker.stop()


def topic_rows(tiered: TieredTopic) -> list[Row]:
    """Every record of the topic, read through the broker by a confluent_kafka consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": tiered.bootstrap,
            "group.id": "reference",
            "enable.auto.commit": False,
        }
    )
    rows: list[Row] = []
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(tiered.topic, p), timeout=10)[1]
            for p in range(tiered.partitions)
        }
        consumer.assign([TopicPartition(tiered.topic, p, 0) for p in range(tiered.partitions)])
        deadline = time.monotonic() + 60
        while len(rows) < sum(ends.values()) and time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=1):
                assert m.error() is None, m.error()
                rows.append((m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
    finally:
        consumer.close()
    assert len(rows) == sum(ends.values()), f"read {len(rows)} of {sum(ends.values())} records"
    return sorted(rows)


def table_rows(spark: Any, path: str | Any) -> list[Row]:
    """A Delta table's (partition, offset, key, value, timestamp ms), sorted; duplicates kept."""
    rows = (
        spark.read.format("delta")
        .load(str(path))
        .selectExpr("partition", "offset", "key", "value", "unix_millis(timestamp) as ts")
        .collect()
    )
    return sorted(
        (r[0], r[1], None if r[2] is None else bytes(r[2]), bytes(r[3]), r[4]) for r in rows
    )
