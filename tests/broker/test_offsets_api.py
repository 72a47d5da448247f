"""Offset APIs with real clients and raw requests: DeleteRecords, ListOffsets (earliest,
latest, by timestamp, max timestamp) and OffsetForLeaderEpoch, including across a leader
epoch change and a restart."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import kafka.errors as kerr
import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.admin import OffsetSpec as KOffsetSpec

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey

BASE_TS = 1_700_000_000_000
# Kafka error codes checked on raw answers.
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


def create(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=10)


def produce(
    bootstrap: str, topic: str, count: int, partition: int = 0, timestamps: list[int] | None = None
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        ts = timestamps[i] if timestamps is not None else BASE_TS + i * 1000
        producer.produce(topic, value=b"%d" % i, partition=partition, timestamp=ts)
        producer.flush(5)  # one batch per record: the time index sees each one
    assert producer.flush(10) == 0


def first_message(bootstrap: str, tp: TopicPartition, **config: Any) -> Message:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "first", "enable.auto.commit": False, **config}
    )
    try:
        consumer.assign([tp])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                return msg
        raise AssertionError(f"no message from {tp} in 10 s")
    finally:
        consumer.close()


def list_offset(admin: AdminClient, tp: TopicPartition, spec: OffsetSpec) -> Any:
    return admin.list_offsets({tp: spec})[tp].result(timeout=10)


def raw_list_offsets(
    raw: RawClient, version: int, topic: str, partition: int, timestamp: int, epoch: int = -1
) -> Any:
    answer = raw.call(
        request(
            ApiKey.LIST_OFFSETS,
            version,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "timeout": 5000,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "current_leader_epoch": epoch,
                                "timestamp": timestamp,
                            }
                        ],
                    }
                ],
            },
        )
    )
    return answer.topics[0].partitions[0]


def leader_epoch_end(
    raw: RawClient, topic: str, epoch: int, current: int = -1, version: int = 4
) -> tuple[int, int, int]:
    """(error code, leader epoch, end offset) of one OffsetForLeaderEpoch query."""
    answer = raw.call(
        request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            version,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
                        ],
                    }
                ],
            },
        )
    )
    p = answer.topics[0].partitions[0]
    return int(p.error_code), int(p.leader_epoch), int(p.end_offset)


def raw_delete_records(raw: RawClient, topic: str, partition: int, offset: int) -> tuple[int, int]:
    answer = raw.call(
        request(
            ApiKey.DELETE_RECORDS,
            2,
            {
                "topics": [
                    {
                        "name": topic,
                        "partitions": [{"partition_index": partition, "offset": offset}],
                    }
                ],
                "timeout": 5000,
            },
        )
    )
    p = answer.topics[0].partitions[0]
    return int(p.error_code), int(p.low_watermark)


# -- DeleteRecords --------------------------------------------------------------------------


def test_delete_records_confluent(broker: BrokerProcess) -> None:
    create(broker.bootstrap, "dr", 2)
    produce(broker.bootstrap, "dr", 20)
    produce(broker.bootstrap, "dr", 5, partition=1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp0 = TopicPartition("dr", 0)

    def delete(tp: TopicPartition) -> Any:
        return admin.delete_records([tp])[tp].result(timeout=10)

    assert delete(TopicPartition("dr", 0, 7)).low_watermark == 7
    assert delete(TopicPartition("dr", 0, 3)).low_watermark == 7  # never goes back
    assert delete(TopicPartition("dr", 1, OFFSET_END)).low_watermark == 5  # -1: the HW
    for beyond in (TopicPartition("dr", 0, 21), TopicPartition("dr", 0, -7)):
        with pytest.raises(KafkaException) as info:
            delete(beyond)
        assert info.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE

    assert list_offset(admin, tp0, OffsetSpec.earliest()).offset == 7
    assert list_offset(admin, tp0, OffsetSpec.latest()).offset == 20
    # By timestamp: records below the low watermark are not found any more.
    assert list_offset(admin, tp0, OffsetSpec.for_timestamp(BASE_TS)).offset == 7
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        assert consumer.get_watermark_offsets(tp0, timeout=10) == (7, 20)
        assert consumer.get_watermark_offsets(TopicPartition("dr", 1), timeout=10) == (5, 5)
    finally:
        consumer.close()
    # Consumers start at the low watermark: from the beginning, and after an
    # out-of-range position is reset.
    msg = first_message(broker.bootstrap, TopicPartition("dr", 0, OFFSET_BEGINNING))
    assert (msg.offset(), msg.value()) == (7, b"7")
    msg = first_message(
        broker.bootstrap, TopicPartition("dr", 0, 2), **{"auto.offset.reset": "earliest"}
    )
    assert msg.offset() == 7

    # The low watermark is durable.
    assert broker.stop() == 0
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert list_offset(admin, tp0, OffsetSpec.earliest()).offset == 7


def test_delete_records_kafka_python(broker: BrokerProcess) -> None:
    create(broker.bootstrap, "kdr")
    produce(broker.bootstrap, "kdr", 20)
    tp = KTopicPartition("kdr", 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        result = admin.delete_records({tp: 9})
        assert (result[tp]["low_watermark"], result[tp]["error_code"]) == (9, 0)
        with pytest.raises(kerr.OffsetOutOfRangeError):
            admin.delete_records({tp: 100})
        with pytest.raises(kerr.UnknownTopicOrPartitionError):
            admin.delete_records({KTopicPartition("kdr", 4): 1})
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=5000)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 9}
        assert consumer.end_offsets([tp]) == {tp: 20}
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        offsets = []
        for message in consumer:  # bounded by consumer_timeout_ms
            offsets.append(message.offset)
            if message.offset == 19:
                break
        assert offsets == list(range(9, 20))
    finally:
        consumer.close()

    # Clients may not delete records of internal topics (Kafka's rule): that would erase
    # every group's committed offsets.
    raw = RawClient(broker.port)
    try:
        lookup = request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        deadline = time.monotonic() + 10
        while int(raw.call(lookup).error_code) != 0:  # creates __consumer_offsets
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert raw_delete_records(raw, "__consumer_offsets", 0, -1) == (
            INVALID_TOPIC_EXCEPTION,
            -1,
        )
        assert raw_delete_records(raw, "never-made", 0, 1)[0] == UNKNOWN_TOPIC_OR_PARTITION
    finally:
        raw.close()


# -- ListOffsets ----------------------------------------------------------------------------


def test_list_offsets_every_spec(broker: BrokerProcess) -> None:
    create(broker.bootstrap, "lo", 2)
    # Record 5 carries the largest timestamp: MAX_TIMESTAMP must find it, not the last one.
    stamps = [BASE_TS + i * 1000 for i in range(10)]
    stamps[5] = BASE_TS + 60_000
    produce(broker.bootstrap, "lo", 10, timestamps=stamps)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition("lo", 0)
    assert list_offset(admin, tp, OffsetSpec.earliest()).offset == 0
    latest = list_offset(admin, tp, OffsetSpec.latest())
    assert (latest.offset, latest.leader_epoch) == (10, 0)
    found = list_offset(admin, tp, OffsetSpec.for_timestamp(BASE_TS + 2500))
    assert (found.offset, found.timestamp) == (3, BASE_TS + 3000)
    highest = list_offset(admin, tp, OffsetSpec.max_timestamp())
    assert (highest.offset, highest.timestamp) == (5, BASE_TS + 60_000)
    assert list_offset(admin, tp, OffsetSpec.for_timestamp(BASE_TS + 99_000)).offset == -1
    empty = list_offset(admin, TopicPartition("lo", 1), OffsetSpec.latest())
    # Kafka answers the latest offset with the current leader epoch, even when empty.
    assert (empty.offset, empty.leader_epoch) == (0, 0)
    with pytest.raises(KafkaException):  # librdkafka knows there is no partition 7
        list_offset(admin, TopicPartition("lo", 7), OffsetSpec.earliest())

    ktp, empty_ktp = KTopicPartition("lo", 0), KTopicPartition("lo", 1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert consumer.beginning_offsets([ktp, empty_ktp]) == {ktp: 0, empty_ktp: 0}
        assert consumer.end_offsets([ktp, empty_ktp]) == {ktp: 10, empty_ktp: 0}
        times = consumer.offsets_for_times(
            {ktp: BASE_TS + 2500, empty_ktp: BASE_TS, KTopicPartition("lo", 0): BASE_TS + 2500}
        )
        assert (times[ktp].offset, times[ktp].timestamp) == (3, BASE_TS + 3000)
        assert times[ktp].leader_epoch == 0
        assert times[empty_ktp] is None
        assert consumer.offsets_for_times({ktp: BASE_TS + 99_000}) == {ktp: None}
    finally:
        consumer.close()
    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        specs = {ktp: KOffsetSpec.MAX_TIMESTAMP}
        assert kadmin.list_partition_offsets(specs)[ktp].offset == 5
        specs = {ktp: KOffsetSpec.EARLIEST, empty_ktp: KOffsetSpec.LATEST}
        answer = kadmin.list_partition_offsets(specs)
        assert (answer[ktp].offset, answer[empty_ktp].offset) == (0, 0)
    finally:
        kadmin.close()

    raw = RawClient(broker.port)
    try:
        # v1: no leader epoch in the answer; MAX_TIMESTAMP (-3) arrived in v7.
        v1 = raw_list_offsets(raw, 1, "lo", 0, -1)
        assert (int(v1.error_code), int(v1.offset)) == (0, 10)
        v7 = raw_list_offsets(raw, 7, "lo", 0, -3)
        assert (int(v7.offset), int(v7.leader_epoch)) == (5, 0)
        # KIP-405 / KIP-1005: earliest local (-4) is the log start; nothing is tiered (-5).
        assert int(raw_list_offsets(raw, 8, "lo", 0, -4).offset) == 0
        assert int(raw_list_offsets(raw, 9, "lo", 0, -5).offset) == -1
        # KIP-320 fencing on the client's idea of the leader epoch.
        newer = raw_list_offsets(raw, 11, "lo", 0, -1, epoch=5)
        assert int(newer.error_code) == UNKNOWN_LEADER_EPOCH
        assert int(raw_list_offsets(raw, 11, "lo", 0, -1, epoch=0).error_code) == 0
        missing = raw_list_offsets(raw, 11, "nope", 0, -1)
        assert int(missing.error_code) == UNKNOWN_TOPIC_OR_PARTITION
    finally:
        raw.close()


# -- OffsetForLeaderEpoch -------------------------------------------------------------------


def bump_leader_epoch(data_dir: Path, topic: str, epoch: int) -> None:
    """What a leader change does to a partition's metadata; a single node never has one, so
    the stopped broker's metadata file is edited (its format: coordination/local.py)."""
    path = data_dir / "tierlog-metadata.json"
    doc = json.loads(path.read_text())
    doc["topics"][topic]["states"]["0"]["leader_epoch"] = epoch
    path.write_text(json.dumps(doc))


def test_offset_for_leader_epoch(broker: BrokerProcess) -> None:
    create(broker.bootstrap, "ole")
    raw = RawClient(broker.port)
    try:
        # The leader's epoch starts at its log end as soon as it leads, not at its first
        # append: an empty partition answers (0, 0).
        assert leader_epoch_end(raw, "ole", 0) == (0, 0, 0)
        assert leader_epoch_end(raw, "ole", 0, version=2) == (0, 0, 0)
    finally:
        raw.close()
    produce(broker.bootstrap, "ole", 10)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "val", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("ole", 0, 0)])
    try:
        seen = []
        deadline = time.monotonic() + 10
        while len(seen) < 8 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg)
        assert len(seen) == 8
        # Committed with the epoch of the last record read (0).
        consumer.commit(message=seen[-1], asynchronous=False)
    finally:
        consumer.close()

    raw = RawClient(broker.port)
    try:
        assert leader_epoch_end(raw, "ole", 0) == (0, 0, 10)  # current epoch: the log end
        assert leader_epoch_end(raw, "ole", 1) == (0, -1, -1)  # newer than any: undefined
        assert leader_epoch_end(raw, "ole", -1) == (0, -1, -1)
        assert leader_epoch_end(raw, "ole", 0, current=3)[0] == UNKNOWN_LEADER_EPOCH
        assert leader_epoch_end(raw, "nope", 0)[0] == UNKNOWN_TOPIC_OR_PARTITION
    finally:
        raw.close()

    # A leader change to epoch 2, then more records in it.
    assert broker.stop() == 0
    bump_leader_epoch(broker.data_dir, "ole", 2)
    broker.start()
    produce(broker.bootstrap, "ole", 5)
    raw = RawClient(broker.port)
    try:
        assert leader_epoch_end(raw, "ole", 2) == (0, 2, 15)
        assert leader_epoch_end(raw, "ole", 0) == (0, 0, 10)  # ends where epoch 2 starts
        # Epoch 1 never had a leader here: the largest known epoch below it, ending where
        # the next one starts (Kafka's LeaderEpochFileCache.endOffsetFor).
        assert leader_epoch_end(raw, "ole", 1) == (0, 0, 10)
        assert leader_epoch_end(raw, "ole", 2, current=0)[0] == FENCED_LEADER_EPOCH
        assert leader_epoch_end(raw, "ole", 2, current=2)[0] == 0
        latest = raw_list_offsets(raw, 11, "ole", 0, -1)
        assert (int(latest.offset), int(latest.leader_epoch)) == (15, 2)
        assert int(raw_list_offsets(raw, 11, "ole", 0, -2).leader_epoch) == 0
        # Records below 12 deleted: epoch 0 is older than every remaining entry, and ends
        # where the first remaining one starts, reported with the epoch asked for.
        assert raw_delete_records(raw, "ole", 0, 12) == (0, 12)
        assert leader_epoch_end(raw, "ole", 0) == (0, 0, 12)
        assert leader_epoch_end(raw, "ole", 2) == (0, 2, 15)
        assert int(raw_list_offsets(raw, 11, "ole", 0, -2).leader_epoch) == 2
    finally:
        raw.close()

    # A consumer resuming from its commit (offset 8, epoch 0) validates it with
    # OffsetForLeaderEpoch (KIP-320); 8 is now below the log start, so it resets to 12.
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "val",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition("ole", 0)])
    try:
        offsets = []
        deadline = time.monotonic() + 10
        while len(offsets) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                offsets.append(msg.offset())
        assert offsets == [12, 13, 14]
    finally:
        consumer.close()


def test_committed_offset_survives_a_leader_epoch_change(broker: BrokerProcess) -> None:
    """librdkafka validates a committed position whose epoch is older than the leader's
    (KIP-320); a wrong OffsetForLeaderEpoch answer makes it reset or skip."""
    create(broker.bootstrap, "val")
    produce(broker.bootstrap, "val", 10)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("val", 0, 0)])
    try:
        seen: list[Message] = []
        deadline = time.monotonic() + 10
        while len(seen) < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg)
        consumer.commit(message=seen[5], asynchronous=False)  # offset 6, epoch 0
    finally:
        consumer.close()
    assert broker.stop() == 0
    bump_leader_epoch(broker.data_dir, "val", 4)
    broker.start()
    produce(broker.bootstrap, "val", 4)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "g",
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",  # a wrong "truncated" verdict would jump to 14
        }
    )
    consumer.assign([TopicPartition("val", 0)])
    try:
        offsets = []
        deadline = time.monotonic() + 10
        while len(offsets) < 8 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                offsets.append((msg.offset(), msg.leader_epoch()))
        assert offsets == [(o, 0) for o in range(6, 10)] + [(o, 4) for o in range(10, 14)]
    finally:
        consumer.close()
