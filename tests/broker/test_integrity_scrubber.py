"""Issue 10, item 2 against a real broker and a real client: bit rot in a closed segment
is found by the scrubber, reported with partition, offsets and file, counted in the
metrics, and never delivered: librdkafka with its default ``check.crcs=false`` got a
changed value before."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tierlog.client.log_client import ClientError, LogClient
from tierlog.protocol.errors import ErrorCode
from tierlog.records.header import iter_batches


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_bit_rot_in_a_closed_segment_is_found_and_never_served(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data",
        {"log.scrubber.bytes.per.second": str(50 << 20), "metrics.http.port": "0"},
    ).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = NewTopic("rot", 1, 1, config={"segment.bytes": "8000"})
        admin.create_topics([topic])["rot"].result(timeout=10)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.num.messages": 20}
        )
        for i in range(1000):
            producer.produce("rot", value=b"%06d" % i)
        assert producer.flush(30) == 0
        broker.stop()
        segment = sorted((broker.data_dir / "rot-0").glob("*.log"))[1]
        position, header = list(iter_batches(segment.read_bytes()))[3]
        with open(segment, "r+b") as f:  # flip 8 bytes inside the batch's last value
            f.seek(position + header.size - 9)
            data = f.read(8)
            f.seek(position + header.size - 9)
            f.write(bytes(b ^ 0x01 for b in data))
        broker.start()
        port = int(re.findall(r"metrics on http://[^:]+:(\d+)/", broker.log_text())[-1])
        deadline = time.monotonic() + 20
        while metric(port, "tierlog_scrubber_corrupt_batches_total") < 1:
            assert time.monotonic() < deadline, broker.log_text()
            time.sleep(0.2)
        log_text = broker.log_text()
        assert f"rot-0 offsets {header.base_offset}-{header.last_offset}" in log_text
        assert str(segment.name) in log_text
        assert metric(port, "tierlog_scrubber_damaged_ranges") == 1
        assert metric(port, "tierlog_scrubber_verified_segments_total") >= 1

        with LogClient(broker.bootstrap, retries=0) as client:
            try:
                client.fetch("rot", 0, header.base_offset)
            except ClientError as exc:
                assert exc.error == ErrorCode.kafka_storage_error
            else:
                raise AssertionError("the damaged batch was served")

        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "rot", "check.crcs": False}
        )
        consumer.assign([TopicPartition("rot", 0, 0)])
        values: list[int] = []
        until = time.monotonic() + 6
        try:
            while time.monotonic() < until:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    values.append(int(msg.value()))
        finally:
            consumer.close()
        # Everything before the damage, in order, and nothing changed or after it.
        assert values == list(range(header.base_offset))
    finally:
        broker.stop()
