"""Topic deletion is total (issue 20, items 4 and 5): once DeleteTopics answered, the data is
gone for good, whatever the name's length and however the broker stops afterwards. A real
broker process, real clients (confluent-kafka), kill -9 as the crash."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess

pytestmark = pytest.mark.timeout(240)


def create(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def produce(bootstrap: str, name: str, count: int, partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(count):
        producer.produce(name, value=b"old-%06d" % i, partition=i % partitions)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def read_all(bootstrap: str, name: str, partitions: int) -> list[bytes]:
    """Every record of ``name`` from offset 0, read until each partition's end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "deletion-check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(name, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{name}: ends not reached ({at_end})"
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise AssertionError(error)
            values.append(message.value() or b"")
    finally:
        consumer.close()
    return values


def partition_dirs(data_dir: Path, name: str) -> list[str]:
    """Directories under the data dir that hold (or held) a partition of ``name``."""
    prefix = name[:100]
    return sorted(p.name for p in data_dir.iterdir() if p.is_dir() and p.name.startswith(prefix))


def test_deleting_a_topic_with_a_long_name_is_total(tmp_path: Path) -> None:
    """Item 4: a 240-character name made the directory renamed aside on deletion too long
    for the file system (``File name too long``). The deletion answered OK, the directory
    stayed through restarts, and the topic created again served the deleted messages."""
    name = "t" * 240
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create(broker.bootstrap, name)
        produce(broker.bootstrap, name, 100)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([name])[name].result(timeout=30)
        deadline = time.monotonic() + 10
        while partition_dirs(broker.data_dir, name):
            assert time.monotonic() < deadline, partition_dirs(broker.data_dir, name)
            time.sleep(0.1)
        assert broker.stop() == 0
        broker.start()
        create(broker.bootstrap, name)
        assert read_all(broker.bootstrap, name, 1) == []
        assert "File name too long" not in broker.log_text()
    finally:
        broker.stop()


def test_a_deletion_once_answered_finishes_after_kill_9(tmp_path: Path) -> None:
    """Item 5: kill -9 while DeleteTopics works, ten rounds with the kill at a different
    moment each time. Whether or not the answer came before the kill, the topic created
    again must never serve what was deleted; and a deletion that was answered must have
    happened (the topic is gone) after the restart."""
    partitions, messages = 8, 2000
    rng = random.Random(20_5)
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        for round_ in range(10):
            name = f"doomed-{round_}"
            create(broker.bootstrap, name, partitions)
            produce(broker.bootstrap, name, messages, partitions)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            future = admin.delete_topics([name], operation_timeout=30)[name]
            time.sleep(rng.uniform(0.0, 0.05))
            broker.kill()
            answered = future.done() and future.exception() is None
            broker.start()
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            listed = name in admin.list_topics(timeout=10).topics
            assert not (answered and listed), f"round {round_}: deleted, but back after kill -9"
            if listed:  # the deletion never happened: do it again, cleanly
                admin.delete_topics([name])[name].result(timeout=30)
            create(broker.bootstrap, name, partitions)
            values = read_all(broker.bootstrap, name, partitions)
            assert values == [], f"round {round_}: the new topic served {len(values)} deleted"
        assert "Traceback" not in broker.log_text(), broker.log_text()[-3000:]
    finally:
        broker.stop()


def test_a_directory_of_another_topic_id_is_never_served(tmp_path: Path) -> None:
    """A partition directory left over from an earlier topic of the same name (its
    ``partition.metadata`` names another topic id) is a stray: never loaded as the new
    topic's log, set aside with a log line."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create(broker.bootstrap, "again")
        produce(broker.bootstrap, "again", 50)
        assert broker.stop() == 0
        kept = tmp_path / "kept-again-0"
        (broker.data_dir / "again-0").rename(kept)
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["again"])["again"].result(timeout=30)
        create(broker.bootstrap, "again")
        assert broker.stop() == 0
        # The old incarnation's directory comes back under the new topic's name.
        new_dir = broker.data_dir / "again-0"
        for child in new_dir.iterdir():
            child.unlink()
        new_dir.rmdir()
        kept.rename(new_dir)
        broker.start()
        assert read_all(broker.bootstrap, "again", 1) == []
        assert "stray" in broker.log_text()
        # The new topic works: what is produced now is what is read.
        produce(broker.bootstrap, "again", 10)
        assert len(read_all(broker.bootstrap, "again", 1)) == 10
    finally:
        broker.stop()


def test_logs_beside_a_new_metadata_file_are_kept_aside_not_removed(tmp_path: Path) -> None:
    """The single node's metadata file moved away (its operator's way out of a garbled
    one): the logs it named are strays now, but the metadata is what was lost, so they are
    renamed ``-stray`` and kept for the operator, never served and never removed."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create(broker.bootstrap, "precious")
        produce(broker.bootstrap, "precious", 20)
        assert broker.stop() == 0
        (broker.data_dir / "tierlog-metadata.json").rename(tmp_path / "metadata-backup.json")
        broker.start()
        kept = [p for p in broker.data_dir.iterdir() if p.name.endswith("-stray")]
        assert [p.name.split(".")[0] for p in kept] == ["precious-0"], kept
        assert any(p.name.endswith(".log") and p.stat().st_size for p in kept[0].iterdir())
        create(broker.bootstrap, "precious")
        assert read_all(broker.bootstrap, "precious", 1) == []
        assert "kept as" in broker.log_text()
    finally:
        broker.stop()
