"""A tiered topic deleted and created again under the same name: the new topic must not
inherit the old one's remote segments (KIP-405 deletes them with the topic), and local
retention must not take the old manifest as proof that the new data is remote."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.broker.test_tiered import fill, manifest, tiered_broker, wait_for_offload


def values_from_start(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if len(values) >= expected:
                    break
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_recreated_topic_starts_with_an_empty_remote_tier(tmp_path: Path) -> None:
    broker = tiered_broker(tmp_path)
    try:
        fill(broker.bootstrap, "reborn")
        wait_for_offload(broker.data_dir, "reborn")
        old_id = manifest(broker.data_dir, "reborn")["topic_id"]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["reborn"])["reborn"].result(timeout=10)
        fill(broker.bootstrap, "reborn", count=400)  # tiered again, 400 new records
        time.sleep(2)  # several remote-manager cycles (every 200 ms here)
        values = values_from_start(broker.bootstrap, "reborn", 400)
        assert [int(v[:6]) for v in values] == list(range(400))
        now = manifest(broker.data_dir, "reborn")
        assert now.get("topic_id") != old_id
        assert all(s["end_offset"] < 400 for s in now["segments"])
    finally:
        broker.stop()


def test_deleting_a_tiered_topic_deletes_its_remote_data(tmp_path: Path) -> None:
    broker = tiered_broker(tmp_path)
    try:
        fill(broker.bootstrap, "doomed")
        wait_for_offload(broker.data_dir, "doomed")
        remote_dir = broker.data_dir / "remote" / "doomed-0"
        assert any(remote_dir.glob("*.log"))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["doomed"])["doomed"].result(timeout=10)
        deadline = time.monotonic() + 20
        while [p for p in remote_dir.glob("*") if not p.name.startswith(".")]:
            assert time.monotonic() < deadline, sorted(p.name for p in remote_dir.glob("*"))
            time.sleep(0.2)
    finally:
        broker.stop()
