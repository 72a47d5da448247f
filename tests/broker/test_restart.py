"""Restarts, clean and kill -9: acknowledged data, topics, configs, leader epochs and
idempotent producer state all come back."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.broker.harness import BrokerProcess

MESSAGES = 4000


def read_partition(
    bootstrap: str, topic: str, partition: int, timeout: float = 30.0
) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
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
            values.append(msg.value())
    finally:
        consumer.close()
    raise AssertionError(f"did not reach the end of {topic}-{partition} in {timeout}s")


def test_kill_9_during_acks_all_produce_loses_nothing_and_duplicates_nothing(
    broker: BrokerProcess,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("payments", 1, 1)])["payments"].result(timeout=10)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "message.timeout.ms": 60_000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200,
        }
    )
    acked: list[int] = []
    failed: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked.append(int(msg.value()))  # type: ignore[attr-defined]
        else:
            failed.append(err)

    def killer() -> None:
        while len(acked) < MESSAGES // 3:
            time.sleep(0.005)
        broker.kill()  # SIGKILL in the middle of the loop
        broker.start()  # same port, same data dir

    thread = threading.Thread(target=killer)
    thread.start()
    for i in range(MESSAGES):
        producer.produce("payments", value=b"%d" % i, on_delivery=on_delivery)
        producer.poll(0)
        if i % 100 == 0:
            time.sleep(0.01)  # keep the loop running across the restart
    remaining = producer.flush(60)
    thread.join(30)
    assert remaining == 0 and not failed, failed[:3]
    assert sorted(acked) == list(range(MESSAGES))

    values = [int(v) for v in read_partition(broker.bootstrap, "payments", 0)]
    # Every acknowledged message is there exactly once, in produce order.
    assert values == list(range(MESSAGES))


def test_topics_configs_and_leader_epochs_survive_restarts(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("kept", 3, 1, config={"retention.ms": "123456789"})])[
        "kept"
    ].result(timeout=10)
    before = admin.list_topics(timeout=10).topics["kept"]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce("kept", value=b"%d" % i, partition=i % 3)
    assert producer.flush(10) == 0

    assert broker.stop() == 0  # clean
    broker.start()
    broker.kill()  # and unclean
    broker.start()

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    after = admin.list_topics(timeout=10).topics["kept"]
    assert sorted(after.partitions) == sorted(before.partitions) == [0, 1, 2]
    config = admin.describe_configs([ConfigResource("topic", "kept")])
    entries = next(iter(config.values())).result(timeout=10)
    assert entries["retention.ms"].value == "123456789"
    assert sum(len(read_partition(broker.bootstrap, "kept", p)) for p in range(3)) == 30
    # Leader epochs never go down across restarts (clients rely on it).
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "epochs"})
    metadata = consumer.list_topics("kept", timeout=10).topics["kept"]
    consumer.close()
    assert all(p.leader == 0 for p in metadata.partitions.values())


def test_bad_config_is_refused_naming_the_key(tmp_path: object) -> None:
    from pathlib import Path

    data = Path(str(tmp_path)) / "data"
    process = BrokerProcess(data, {"log.retention.hours": "soon"})
    try:
        process.start(timeout=20)
    except RuntimeError as exc:
        assert "log.retention.hours" in str(exc) or "log.retention.hours" in process.log_text()
    else:
        process.stop()
        raise AssertionError("a broker with a malformed config started")
