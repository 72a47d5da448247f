"""Issue 10, items 1 and 3 against a real broker and real clients: a torn active segment
after a clean stop, and a damaged length field in a closed segment."""

from __future__ import annotations

import os
import re
import struct
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tierlog.client.log_client import ClientError, LogClient
from tierlog.protocol.errors import ErrorCode
from tierlog.records.header import iter_batches


def produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 50})
    failed: list[object] = []
    for i in values:
        producer.produce(
            topic,
            value=b"%06d" % i,
            on_delivery=lambda err, _msg: failed.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert not failed


def consume(bootstrap: str, topic: str, timeout: float = 15.0) -> list[int]:
    """Every value of partition 0 up to the end; fails if the end is not reached."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "integrity",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(msg.error())
            values.append(int(msg.value()))
    finally:
        consumer.close()
    raise AssertionError(f"consumer stuck after {len(values)} values")


def create(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=10)


def segments(data_dir: Path, topic: str) -> list[Path]:
    return sorted((data_dir / f"{topic}-0").glob("*.log"))


def test_torn_active_segment_after_a_clean_stop_is_truncated_and_appends_stay_readable(
    broker: BrokerProcess,
) -> None:
    create(broker.bootstrap, "torn")
    produce(broker.bootstrap, "torn", range(500))
    broker.stop()
    active = segments(broker.data_dir, "torn")[-1]
    data = active.read_bytes()
    batches = list(iter_batches(data))
    last_position, last = batches[-1]
    os.truncate(active, last_position + last.size - 10)  # header intact, records cut
    broker.start()
    # The start-up check's own lines, naming the file (the topic is named "torn" too): the
    # batch found cut, then the truncation of its bytes.
    text = broker.log_text()
    assert re.search(
        rf"WARNING .*{re.escape(str(active))}: .* at position {last_position}\b.*; "
        "recovering the segment",
        text,
    ), text[-3000:]
    assert (
        f"{active}: truncated {last.size - 10} corrupt bytes at offset {last.base_offset}" in text
    ), text[-3000:]
    produce(broker.bootstrap, "torn", range(1000, 1100))
    values = consume(broker.bootstrap, "torn")
    assert values == [*range(last.base_offset), *range(1000, 1100)]


def test_fetch_at_a_damaged_length_field_answers_storage_error_not_later_data(
    broker: BrokerProcess,
) -> None:
    create(broker.bootstrap, "damaged", **{"segment.bytes": "8000"})
    produce(broker.bootstrap, "damaged", range(2000))
    broker.stop()
    first = segments(broker.data_dir, "damaged")[0]
    batches = list(iter_batches(first.read_bytes()))
    assert len(batches) >= 4
    position, header = batches[2]
    with open(first, "r+b") as f:
        f.seek(position + 8)
        f.write(struct.pack(">i", 0x7FFF0000))
    broker.start()
    with LogClient(broker.bootstrap, retries=0) as client:
        for offset in (header.base_offset, header.next_offset):
            try:
                result = client.fetch("damaged", 0, offset)
            except ClientError as exc:
                assert exc.error == ErrorCode.kafka_storage_error
            else:
                raise AssertionError(
                    f"fetch at {offset} answered {len(result.records)} bytes, no error"
                )
        # Intact data before the damage is still served.
        ok = client.fetch("damaged", 0, 0)
        assert ok.records
