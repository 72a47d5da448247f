"""A tiered topic deleted and created again under the same name: the new topic must not
inherit the old one's remote segments (KIP-405 deletes them with the topic), and local
retention must not take the old manifest as proof that the new data is remote."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tests.broker.test_tiered import (
    confluent_replay,
    fill,
    manifest,
    tiered_broker,
    wait_for_offload,
)
from tierlog.client import EARLIEST, LATEST, LogClient


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
        values = confluent_replay(broker.bootstrap, "reborn", count=400)
        assert [int(v[:6]) for v in values] == list(range(400))
        with LogClient(broker.bootstrap) as client:  # and nothing of the old topic after them
            bounds = (
                client.list_offsets({("reborn", 0): EARLIEST}),
                client.list_offsets({("reborn", 0): LATEST}),
            )
        assert bounds == ({("reborn", 0): 0}, {("reborn", 0): 400})
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
        assert any(remote_dir.glob("*.segment"))  # one object per segment (issue 24)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["doomed"])["doomed"].result(timeout=10)
        deadline = time.monotonic() + 20
        while [p for p in remote_dir.glob("*") if not p.name.startswith(".")]:
            assert time.monotonic() < deadline, sorted(p.name for p in remote_dir.glob("*"))
            time.sleep(0.2)
    finally:
        broker.stop()
