"""Offsets sent to transactions (TxnOffsetCommit) with a real client against a broker
process: an open transaction's offsets are invisible (read_uncommitted fetches see the last
committed offset, read_committed ones, which set require_stable, get no answer until it
ends), and after a restart the coordinator rebuilds them from ``__consumer_offsets``
markers included."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.broker.harness import BrokerProcess
from tests.broker.test_transactions import TXN_OVERRIDES, create_topic, transactional_producer

GROUP = "txn-offsets"
SOURCE = TopicPartition("source", 0)


def group_consumer(bootstrap: str, isolation: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "log_level": 4,
        }
    )


def committed(bootstrap: str, isolation: str, timeout: float = 10) -> int:
    consumer = group_consumer(bootstrap, isolation)
    try:
        return int(consumer.committed([SOURCE], timeout=timeout)[0].offset)
    finally:
        consumer.close()


def send_offset(producer: Producer, metadata: object, offset: int) -> None:
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        [TopicPartition(SOURCE.topic, SOURCE.partition, offset)], metadata, 15
    )


@pytest.mark.timeout(180)
def test_transactional_offsets_pending_then_reloaded_after_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", TXN_OVERRIDES).start()
    try:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, SOURCE.topic)
        metadata_source = group_consumer(bootstrap, "read_committed")
        metadata = metadata_source.consumer_group_metadata()
        producer = transactional_producer(bootstrap, "offsets-txn")

        send_offset(producer, metadata, 5)
        producer.commit_transaction(15)
        assert committed(bootstrap, "read_committed") == 5

        send_offset(producer, metadata, 8)  # left open for now
        assert committed(bootstrap, "read_uncommitted") == 5
        with pytest.raises(KafkaException):
            # require_stable: UNSTABLE_OFFSET_COMMIT until the transaction ends.
            committed(bootstrap, "read_committed", timeout=3)
        producer.abort_transaction(15)
        assert committed(bootstrap, "read_committed") == 5

        send_offset(producer, metadata, 12)
        producer.commit_transaction(15)
        send_offset(producer, metadata, 20)
        producer.abort_transaction(15)
        assert committed(bootstrap, "read_committed") == 12
        metadata_source.close()
        producer.flush(5)
        del producer

        assert broker.stop() == 0
        broker.start()  # same port, same data dir: the group is loaded from the log
        assert committed(broker.bootstrap, "read_committed", timeout=20) == 12
    finally:
        broker.stop()
