"""Moving replicas between a broker's log.dirs (AlterReplicaLogDirs, KIP-113) on a real
broker process: while producers write to it, and across a SIGKILL in the middle of the
copy. Every acknowledged record is read back afterwards, from the new dir only."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.broker.harness import BrokerProcess
from tests.broker.test_clients_produce_consume import consume_all, create_topic
from tests.raw_client import RawClient, request

pytestmark = pytest.mark.timeout(180)

TOPIC = "moving"


def two_dir_broker(tmp_path: Path, **overrides: str) -> tuple[BrokerProcess, Path, Path]:
    a, b = (tmp_path / "a").resolve(), (tmp_path / "b").resolve()
    broker = BrokerProcess(
        tmp_path / "data", {"log.dirs": f"{a},{b}", "log.segment.bytes": "262144", **overrides}
    )
    return broker, a, b


def dir_of(raw: RawClient, partition: int) -> dict[str, bool]:
    """log dir -> whether it holds the partition as a future replica (DescribeLogDirs)."""
    answer = raw.call(request(35, 4, {"topics": None}))
    found = {}
    for result in answer.results:
        for topic in result.topics:
            for p in topic.partitions:
                if topic.name == TOPIC and p.partition_index == partition:
                    found[result.log_dir] = p.is_future_key
    return found


def alter(raw: RawClient, path: Path, partition: int = 0) -> int:
    answer = raw.call(
        request(
            34,
            2,
            {"dirs": [{"path": str(path), "topics": [{"name": TOPIC, "partitions": [partition]}]}]},
        )
    )
    return int(answer.results[0].partitions[0].error_code)


def produce(bootstrap: str, first: int, count: int) -> set[bytes]:
    """Values acknowledged by the broker (acks=all, idempotent)."""
    acked: set[bytes] = set()
    producer = Producer(
        # Batches well below the test's 256 KiB segments (a batch must fit in one).
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 65536,
        }
    )

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked.add(msg.value())

    for i in range(first, first + count):
        producer.produce(TOPIC, value=f"record-{i:07d}".encode() + bytes(200), on_delivery=done)
        producer.poll(0)
    producer.flush(60)
    return acked


def wait_for(what: str, check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def future_dirs(path: Path) -> list[Path]:
    return [Path(e.path) for e in os.scandir(path) if e.name.endswith("-future")]


def test_a_partition_moves_while_producers_write_to_it(tmp_path: Path) -> None:
    # 1 MB/s: the copy takes a few seconds, long enough to be seen and written through.
    broker, a, b = two_dir_broker(
        tmp_path, **{"replica.alter.log.dirs.io.max.bytes.per.second": "1000000"}
    )
    broker.start()
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        raw = RawClient(broker.port)
        acked = produce(broker.bootstrap, 0, 15_000)  # ~3.4 MB
        start = str(a) if str(a) in dir_of(raw, 0) else str(b)
        target = b if start == str(a) else a
        assert alter(raw, tmp_path / "nowhere") == 57  # LOG_DIR_NOT_FOUND
        assert alter(raw, target) == 0
        # The copy shows as the future replica in the target while it is made.
        wait_for("the future replica", lambda: dir_of(raw, 0).get(str(target)) is True)
        writer = threading.Thread(
            target=lambda: acked.update(produce(broker.bootstrap, 15_000, 5_000))
        )
        writer.start()
        writer.join(90)
        wait_for("the move", lambda: dir_of(raw, 0) == {str(target): False})
        assert alter(raw, target) == 0  # already there: nothing to do
        assert len(acked) == 20_000
        values = {v for *_, v in consume_all(broker.bootstrap, TOPIC, 1, len(acked))}
        assert values == acked
        assert not (Path(start) / f"{TOPIC}-0").exists()
        assert future_dirs(target) == []
    finally:
        broker.stop()
    # And the restarted broker finds it in its new place.
    broker.start()
    try:
        raw = RawClient(broker.port)
        assert dir_of(raw, 0) == {str(target): False}
    finally:
        broker.stop()


def test_a_move_killed_mid_copy_resumes_and_loses_nothing(tmp_path: Path) -> None:
    broker, a, b = two_dir_broker(
        tmp_path, **{"replica.alter.log.dirs.io.max.bytes.per.second": "300000"}
    )
    broker.start()
    create_topic(broker.bootstrap, TOPIC, 1)
    raw = RawClient(broker.port)
    acked = produce(broker.bootstrap, 0, 12_000)  # ~2.7 MB: ~9 s at 300 kB/s
    target = b if str(a) in dir_of(raw, 0) else a
    assert alter(raw, target) == 0
    wait_for(
        "part of the copy",
        lambda: any(
            sum(e.stat().st_size for e in os.scandir(f)) > 500_000 for f in future_dirs(target)
        ),
    )
    copy = future_dirs(target)
    broker.kill()
    assert len(copy) == 1
    # Restarted with no throttle: the move goes on from the copy it left.
    broker.overrides["replica.alter.log.dirs.io.max.bytes.per.second"] = str(2**63 - 1)
    broker.start()
    try:
        raw = RawClient(broker.port)
        wait_for("the resumed move", lambda: dir_of(raw, 0) == {str(target): False})
        assert "resuming its move" in broker.log_text()
        values = [v for *_, v in consume_all(broker.bootstrap, TOPIC, 1, len(acked))]
        assert len(values) == len(acked) and set(values) == acked
        assert future_dirs(target) == []
        assert [e.name for e in os.scandir(target) if e.name.startswith(TOPIC)] == [f"{TOPIC}-0"]
    finally:
        broker.stop()


def test_a_replica_not_created_yet_is_created_where_asked(tmp_path: Path) -> None:
    broker, _, b = two_dir_broker(tmp_path)
    broker.start()
    try:
        raw = RawClient(broker.port)
        # Partition 0 would go to the first dir (fewest partitions); ask for the second.
        assert alter(raw, b) == 9  # REPLICA_NOT_AVAILABLE, remembered
        create_topic(broker.bootstrap, TOPIC, 1)
        assert dir_of(raw, 0) == {str(b): False}
    finally:
        broker.stop()
