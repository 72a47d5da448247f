"""A topic's compression.type (and KIP-390 levels) on a real broker with real clients:
what producers send uncompressed is stored in the topic's codec (read back from the
segment file), consumers read identical records, exactly-once holds on a zstd topic, the
levels take effect, bad values are refused naming the key, and an old Fetch of a zstd
topic gets UNSUPPORTED_COMPRESSION_TYPE, as Kafka answers."""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka import KafkaProducer

from tests.broker.harness import BrokerProcess
from tests.raw_client import RawClient, fetch_body, request
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.versions import ApiKey
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import (
    HEADER_SIZE,
    Attr,
    Compression,
    compute_crc,
    iter_batches,
    parse_header,
)
from tierlog.records.reader import iter_records

TOPIC_CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
T_BASE = 1_700_000_000_000


def create_topic(bootstrap: str, name: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 1, 1, config=configs)]).values():
        future.result(timeout=15)


def stored_batches(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes]]:
    """(codec, batch bytes) of every batch in the partition's segment files, as tierlog's
    reader sees them (each CRC-checked)."""
    out = []
    for segment in sorted((broker.data_dir / f"{topic}-0").glob("*.log")):
        data = segment.read_bytes()
        for pos, header in iter_batches(data):
            out.append((header.attributes & Attr.COMPRESSION_MASK, data[pos : pos + header.size]))
    return out


def consume(
    bootstrap: str, topic: str, expected: int, *, committed: bool = False, timeout: float = 20
) -> list[tuple[Any, ...]]:
    """(key, value, headers, timestamp) of the first ``expected`` records, assigned from 0."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.key(), msg.value(), list(msg.headers() or []), msg.timestamp()[1]))
    finally:
        consumer.close()
    return out


def sent_records(n: int) -> list[tuple[Any, ...]]:
    return [
        (b"key-%d" % i, b"value %05d " % i * 8, [("h", b"%d" % i)], T_BASE + i * 7)
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", TOPIC_CODECS)
def test_uncompressed_produce_is_stored_in_the_topics_codec(
    broker: BrokerProcess, codec: str
) -> None:
    topic = f"stored-{codec}"
    create_topic(broker.bootstrap, topic, **{"compression.type": codec})
    records = sent_records(400)
    confluent = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": "none", "linger.ms": 5}
    )
    for key, value, headers, ts in records[:200]:
        confluent.produce(topic, key=key, value=value, headers=headers, timestamp=ts)
    assert confluent.flush(20) == 0
    kafka_python = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    for key, value, headers, ts in records[200:]:
        kafka_python.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts)
    kafka_python.flush(20)
    kafka_python.close()
    batches = stored_batches(broker, topic)
    assert batches and {c for c, _ in batches} == {TOPIC_CODECS[codec]}
    from_segments = [
        (r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp)
        for _, batch in batches
        for r in iter_records(batch)
    ]
    assert from_segments == records
    assert consume(broker.bootstrap, topic, 400) == records


def test_producer_topic_keeps_each_producers_codec(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "as-sent")
    for codec in ("gzip", "lz4"):
        producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec})
        producer.produce("as-sent", value=b"x" * 100)
        assert producer.flush(20) == 0
    assert [c for c, _ in stored_batches(broker, "as-sent")] == [1, 3]


def test_idempotent_and_transactional_producers_on_a_zstd_topic(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "eos", **{"compression.type": "zstd"})
    idempotent = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "compression.type": "none",
            "linger.ms": 2,
        }
    )
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for i in range(300):
        idempotent.produce("eos", value=b"idem-%d" % i, on_delivery=on_delivery)
    assert idempotent.flush(20) == 0 and not errors
    txn = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "zstd-txn",
            "compression.type": "none",
        }
    )
    txn.init_transactions(20)
    txn.begin_transaction()
    for i in range(50):
        txn.produce("eos", value=b"aborted-%d" % i)
    assert txn.flush(20) == 0  # in the log before the abort: read_committed must hide them
    txn.abort_transaction(20)
    txn.begin_transaction()
    for i in range(100):
        txn.produce("eos", value=b"committed-%d" % i)
    txn.commit_transaction(20)
    wanted = [b"idem-%d" % i for i in range(300)] + [b"committed-%d" % i for i in range(100)]
    got = [value for _, value, _, _ in consume(broker.bootstrap, "eos", 400, committed=True)]
    assert got == wanted  # each once, in order, and nothing of the aborted transaction
    everything = [value for _, value, _, _ in consume(broker.bootstrap, "eos", 450)]
    assert sorted(everything) == sorted(wanted + [b"aborted-%d" % i for i in range(50)])
    batches = stored_batches(broker, "eos")
    data = [c for c, b in batches if not parse_header(b).is_control]
    markers = [c for c, b in batches if parse_header(b).is_control]
    assert set(data) == {Compression.ZSTD}
    assert markers == [0, 0]  # the abort and the commit, written uncompressed, stay so


def test_a_higher_gzip_level_stores_a_batch_no_larger(broker: BrokerProcess) -> None:
    text = b" ".join(b"word%d" % (i * 31 % 997) for i in range(3000))
    sizes = []
    for level in ("1", "9"):
        topic = f"gzip-{level}"
        create_topic(
            broker.bootstrap,
            topic,
            **{"compression.type": "gzip", "compression.gzip.level": level},
        )
        producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "none"})
        producer.produce(topic, value=text)
        assert producer.flush(20) == 0
        ((codec, batch),) = stored_batches(broker, topic)
        assert codec == Compression.GZIP
        sizes.append(len(batch))
    assert sizes[1] <= sizes[0]
    assert sizes[1] < sizes[0]  # this text does compress better at 9 (1: fast deflate)


def test_configs_are_checked_altered_and_described(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for key, value in (
        ("compression.gzip.level", "10"),
        ("compression.lz4.level", "0"),
        ("compression.zstd.level", "23"),
        ("compression.type", "brotli"),
    ):
        (future,) = admin.create_topics(
            [NewTopic(f"bad-{key.split('.')[1]}", 1, 1, config={key: value})]
        ).values()
        with pytest.raises(KafkaException) as refused:
            future.result(timeout=15)
        error = refused.value.args[0]
        assert error.code() == KafkaError.INVALID_CONFIG
        assert key in error.str()
    create_topic(broker.bootstrap, "altered")
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "altered",
        incremental_configs=[
            ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "compression.zstd.level", "19", incremental_operation=AlterConfigOpType.SET
            ),
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)
    (described,) = admin.describe_configs([ConfigResource("topic", "altered")]).values()
    entries = described.result(timeout=15)
    assert entries["compression.type"].value == "zstd"
    assert entries["compression.zstd.level"].value == "19"
    assert entries["compression.type"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["compression.gzip.level"].value == "-1"
    assert entries["compression.gzip.level"].source == ConfigSource.DEFAULT_CONFIG.value
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "gzip"})
    producer.produce("altered", value=b"y" * 500)
    assert producer.flush(20) == 0
    assert [c for c, _ in stored_batches(broker, "altered")] == [Compression.ZSTD]


def test_the_broker_default_applies_to_new_topics(tmp_path: Path) -> None:
    broker = BrokerProcess(
        tmp_path / "data", {"compression.type": "lz4", "compression.lz4.level": "12"}
    ).start()
    try:
        create_topic(broker.bootstrap, "defaulted")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        (described,) = admin.describe_configs([ConfigResource("topic", "defaulted")]).values()
        entry = described.result(timeout=15)["compression.type"]
        assert (entry.value, entry.source) == ("lz4", ConfigSource.STATIC_BROKER_CONFIG.value)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "none"})
        producer.produce("defaulted", value=b"z" * 300)
        assert producer.flush(20) == 0
        assert [c for c, _ in stored_batches(broker, "defaulted")] == [Compression.LZ4]
    finally:
        broker.stop()


def test_a_fetch_below_v10_of_a_zstd_topic_is_unsupported(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "zstd-old", **{"compression.type": "zstd"})
    create_topic(broker.bootstrap, "gzip-old", **{"compression.type": "gzip"})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for topic in ("zstd-old", "gzip-old"):
        producer.produce(topic, value=b"v")
    assert producer.flush(20) == 0
    client = RawClient(broker.port)
    try:
        for version, topic, code in (
            (9, "zstd-old", ErrorCode.unsupported_compression_type),
            (10, "zstd-old", 0),
            (9, "gzip-old", 0),
        ):
            answer = client.call(request(ApiKey.FETCH, version, fetch_body(topic, {0: 0})))
            (partition,) = answer.responses[0].partitions
            assert partition.error_code == code, (version, topic)
            assert bool(partition.records) == (code == 0)
    finally:
        client.close()


def reseal(batch: bytearray) -> bytes:
    """``batch`` with its length and CRC made right again (its lie is inside)."""
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    return bytes(batch)


def produce_raw(broker: BrokerProcess, topic: str, batch: bytes) -> tuple[int, int]:
    """(error code, base offset) of a Produce v9 of ``batch`` to partition 0, acks=1."""
    data = {
        "transactional_id": None,
        "acks": 1,
        "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    client = RawClient(broker.port)
    try:
        answer = client.call(request(ApiKey.PRODUCE, 9, data))
    finally:
        client.close()
    p = answer.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def test_a_batch_that_does_not_decompress_is_refused_and_nothing_is_stored(
    broker: BrokerProcess,
) -> None:
    create_topic(broker.bootstrap, "zstd-bad", **{"compression.type": "zstd"})
    good = build_batch(
        [Record(b"k%d" % i, b"v" * 40) for i in range(5)], compression=Compression.GZIP
    )
    garbled = bytearray(good[:HEADER_SIZE]) + good[HEADER_SIZE : HEADER_SIZE + 10] + b"\x00" * 30
    assert produce_raw(broker, "zstd-bad", reseal(garbled))[0] == ErrorCode.corrupt_message
    miscounted = bytearray(good)
    struct.pack_into(">i", miscounted, 57, 4)  # recordCount 4 of the 5 it holds
    struct.pack_into(">i", miscounted, 23, 3)
    assert produce_raw(broker, "zstd-bad", reseal(miscounted))[0] == ErrorCode.invalid_record
    assert stored_batches(broker, "zstd-bad") == []
    assert produce_raw(broker, "zstd-bad", good) == (0, 0)  # the partition still takes batches
    assert [c for c, _ in stored_batches(broker, "zstd-bad")] == [Compression.ZSTD]
