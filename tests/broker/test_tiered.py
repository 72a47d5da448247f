"""The remote tier end to end: closed segments offloaded (file://), the local disk keeps only
the hot tail, and Kafka clients replay the whole log from offset 0 without noticing."""

from __future__ import annotations

import json
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from tests.broker.harness import BrokerProcess
from tests.files import present_bytes
from tierlog.remote import manifest_json
from tierlog.remote.registry import open_store

MESSAGES = 3000
BASE_TS = 1_700_000_000_000
FAST = {
    "log.segment.bytes": "16384",
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
}


def tiered_broker(tmp_path: Path, **extra: str) -> BrokerProcess:
    return BrokerProcess(tmp_path / "data", {**FAST, **extra}).start()


def fill(bootstrap: str, topic: str, count: int = MESSAGES) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics(
        [
            NewTopic(
                topic,
                1,
                1,
                config={
                    "remote.storage.enable": "true",
                    "local.retention.bytes": "40000",
                    "retention.ms": "-1",
                },
            )
        ]
    )[topic].result(timeout=10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.num.messages": 20})
    for i in range(count):
        producer.produce(
            topic, key=b"k%d" % i, value=b"%06d" % i + b"-" * 100, timestamp=BASE_TS + i * 1000
        )
    assert producer.flush(30) == 0


def manifest(data: Path, topic: str) -> dict:
    """The partition's manifest as its JSON document, read through the store (the
    ``manifest.json`` object is a pointer to the current version)."""
    store = open_store((data / "remote").as_uri())
    return json.loads(manifest_json.encode(store.read_manifest(topic, 0)))


def wait_for_offload(data: Path, topic: str, timeout: float = 60) -> None:
    """Until the local log has been trimmed to its hot tail behind the offloaded part."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        local = present_bytes((data / f"{topic}-0").glob("*.log"))
        remote = [s for s in manifest(data, topic)["segments"] if s["state"] == "COPY_FINISHED"]
        if remote and local <= 40000 + 16384:
            return
        time.sleep(0.2)
    raise AssertionError(f"not offloaded in {timeout}s: {manifest(data, topic)}")


def confluent_replay(
    bootstrap: str, topic: str, start: int = 0, count: int = MESSAGES
) -> list[bytes]:
    """Values of partition 0 from ``start`` until ``count`` records were read (bounded)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "replay", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, start)])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count - start and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_replay_from_zero_crosses_the_tier_boundary(tmp_path: Path) -> None:
    broker = tiered_broker(tmp_path)
    try:
        fill(broker.bootstrap, "history")
        data = broker.data_dir
        wait_for_offload(data, "history")
        local_segments = sorted((data / "history-0").glob("*.log"))
        assert int(local_segments[0].stem) > 0  # offset 0 lives only in the remote tier

        values = confluent_replay(broker.bootstrap, "history")
        assert [int(v[:6]) for v in values] == list(range(MESSAGES))

        kc = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            consumer_timeout_ms=10_000,
        )
        tp = KTopicPartition("history", 0)
        kc.assign([tp])
        assert kc.beginning_offsets([tp])[tp] == 0  # earliest is the remote log start
        kc.seek(tp, 0)
        got = []
        for message in kc:
            got.append(int(message.value[:6]))
            if len(got) == MESSAGES:
                break
        # A timestamp seek into the remote range finds the right record.
        found = kc.offsets_for_times({tp: BASE_TS + 123 * 1000 + 1})[tp]
        kc.close()
        assert got == list(range(MESSAGES))
        assert found is not None and found.offset == 124
    finally:
        broker.stop()


def test_offload_resumes_after_restart_and_nothing_is_lost(tmp_path: Path) -> None:
    broker = tiered_broker(tmp_path)
    try:
        fill(broker.bootstrap, "restarted")
        wait_for_offload(broker.data_dir, "restarted")
        broker.kill()
        broker.start()
        values = confluent_replay(broker.bootstrap, "restarted")
        assert [int(v[:6]) for v in values] == list(range(MESSAGES))
    finally:
        broker.stop()


def test_a_clean_stop_during_an_upload_finishes_it_and_its_checkpoint(tmp_path: Path) -> None:
    """Issue 20, item 12: a broker stopped while it uploaded a segment shut the remote
    worker down under the running cycle, which then failed with a traceback ("cannot
    schedule new futures after shutdown") and never wrote that cycle's
    ``remote-log-checkpoint``. Throttled uploads (~2.5 s a segment) make sure the stop
    lands in the middle of one."""
    broker = tiered_broker(
        tmp_path,
        **{
            "log.segment.bytes": str(1 << 20),
            "remote.log.manager.copy.max.bytes.per.second": "400000",
        },
    )
    try:
        fill(broker.bootstrap, "busy", count=40_000)  # ~4 MiB: four segments to upload
        deadline = time.monotonic() + 60
        while "offloaded segment" not in broker.log_text():
            assert time.monotonic() < deadline, broker.log_text()[-3000:]
            time.sleep(0.05)
        # The next upload has started, and its throttle holds it ~2.6 s: stop inside it.
        time.sleep(0.7)
    finally:
        assert broker.stop() == 0
    text = broker.log_text()
    assert "Traceback" not in text and "cannot schedule" not in text, text[-3000:]
    segments = manifest(broker.data_dir, "busy")["segments"]
    committed = [s for s in segments if s["state"] == "COPY_FINISHED"]
    assert committed
    remote_end = max(s["end_offset"] for s in committed) + 1
    checkpoint = (broker.data_dir / "busy-0" / "remote-log-checkpoint").read_text().split()
    assert int(checkpoint[3]) == remote_end, (checkpoint, remote_end)
