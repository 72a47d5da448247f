"""Replay from S3 (moto's HTTP server, s3fs) through a broker subprocess with read-ahead
(issue 24): one object per segment, the next chunks fetched ahead by parallel ranged
GETs into the chunk cache, and every record served exactly as produced."""

from __future__ import annotations

import re
import time
import urllib.request
import zlib
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.broker.harness import BrokerProcess
from tests.integration.tiered_s3 import (
    Remote,
    create_topic,
    local_start,
    produce,
    s3_broker,
    value,
    wait_for_offload,
)
from tests.remote.conftest import S3Bucket


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return str(answer.read().decode())


def counter(text: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    assert found, f"no {name}{labels}"
    return float(found.group(1))


def test_replay_from_s3_with_read_ahead_returns_exactly_the_records(
    tmp_path: Path, s3_bucket: S3Bucket, brokers: list[BrokerProcess]
) -> None:
    messages = 3000
    broker = s3_broker(tmp_path / "data", s3_bucket.endpoint_url, s3_bucket.name)
    broker.overrides["remote.log.reader.read.ahead.chunks"] = "4"
    brokers.append(broker.start())
    remote = Remote(s3_bucket.endpoint_url, s3_bucket.name)
    topic = "replayed"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, 0, messages)
    wait_for_offload(remote, broker.data_dir, topic)
    start = local_start(broker.data_dir, topic)
    assert start > 1000  # most of the topic is remote-only
    committed = remote.committed(topic)
    # One object per segment: the log and its indexes, at the offsets the parts record.
    for segment in committed:
        objects = {part["object"] for part in segment["parts"].values()}
        assert len(objects) == 1 and objects.pop().endswith(".segment")
    assert all(name.endswith((".segment", ".json")) for name in remote.objects(topic))

    port = broker.metrics_port()
    before = metrics(port)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "read-ahead",
            "enable.auto.commit": False,
            # Small fetches: many reads per segment object, each after the read-ahead.
            "message.max.bytes": 8192,
            "fetch.max.bytes": 8192,
            "max.partition.fetch.bytes": 8192,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    offsets: list[int] = []
    got = expected = 0
    deadline = time.monotonic() + 60
    try:
        while len(offsets) < messages and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                offsets.append(msg.offset())
                got = zlib.crc32(msg.value(), got)
    finally:
        consumer.close()
    for i in range(messages):
        expected = zlib.crc32(value(i), expected)
    assert offsets == list(range(messages))
    assert got == expected  # every value, in order, byte for byte
    after = metrics(port)
    # The read-ahead fetched chunks before the consumer asked for them...
    assert counter(after, "tierlog_remote_read_ahead_chunks_total") > counter(
        before, "tierlog_remote_read_ahead_chunks_total"
    )
    # ...and each remote segment was read with few GETs: its log range once (a chunk
    # holds a whole small segment) and its offset index once, whatever the fetch size.
    gets = counter(after, "tierlog_remote_store_requests_total", '{method="GET"}') - counter(
        before, "tierlog_remote_store_requests_total", '{method="GET"}'
    )
    remote_segments = sum(1 for s in committed if s["base_offset"] < start)
    assert 0 < gets <= 3 * remote_segments
    assert broker.stop() == 0
