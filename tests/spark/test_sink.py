"""The ``tierlog`` sink in Spark local mode against a real broker: DataFrames written with
``df.write`` and ``df.writeStream`` arrive as Kafka records (keys, values, headers, topics
and partitions as Spark's Kafka sink writes them), read back with confluent-kafka; what
cannot be written is refused with one message naming the cause."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.partitioner.default import murmur2
from pyspark.sql.functions import lit

from tests.broker.harness import BrokerProcess
from tests.cli import closed_port

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("sink") / "data").start()
    try:
        yield process
    finally:
        process.stop()


def create(broker: BrokerProcess, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics])
    for future in futures.values():
        future.result(30)


def read_all(broker: BrokerProcess, topic: str) -> list[Any]:
    """Every record of ``topic``, partition by partition, in offset order."""
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "log_level": 4}
    )
    try:
        records = []
        for p in range(PARTITIONS):
            _, end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            consumer.assign([TopicPartition(topic, p, 0)])
            got: list[Any] = []
            deadline = time.monotonic() + 30
            while len(got) < end and time.monotonic() < deadline:
                for msg in consumer.consume(500, timeout=1.0):
                    assert msg.error() is None, msg.error()
                    got.append(msg)
            assert len(got) == end, (topic, p, len(got), end)
            records += got
        return records
    finally:
        consumer.close()


def sink(broker: BrokerProcess, **options: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": broker.bootstrap, **options}


def test_rows_arrive_with_their_keys_values_and_headers_in_the_keys_partition(
    spark: Any, broker: BrokerProcess
) -> None:
    create(broker, "sink-events")
    rows = [(f"user-{i % 7}", f"event {i}", [("trace", str(i).encode())]) for i in range(300)]
    df = spark.createDataFrame(
        rows, "key string, value string, headers array<struct<key: string, value: binary>>"
    ).repartition(4)  # four tasks, each its own producer
    df.write.format("tierlog").options(**sink(broker, topic="sink-events")).mode("append").save()

    records = read_all(broker, "sink-events")
    assert sorted(r.value().decode() for r in records) == sorted(v for _, v, _ in rows)
    for record in records:
        key = record.key()
        # The partition Java producers and Spark's Kafka sink pick for the key.
        assert record.partition() == (murmur2(key) & 0x7FFFFFFF) % PARTITIONS, key
        i = int(record.value().decode().split()[1])
        assert key == f"user-{i % 7}".encode()
        assert record.headers() == [("trace", str(i).encode())]


def test_topic_and_partition_columns_route_each_row(spark: Any, broker: BrokerProcess) -> None:
    create(broker, "sink-left", "sink-right")
    rows = [
        ("sink-left", 2, b"k1", b"\x00binary\xff"),
        ("sink-right", 0, None, b"no key"),
        ("sink-right", None, b"k3", None),  # a tombstone; the partitioner picks
        ("sink-left", 1, b"k4", b"four"),
    ]
    df = spark.createDataFrame(
        rows, "topic string, partition int, key binary, value binary"
    ).withColumn("ignored", lit(1))  # other columns are ignored, as by Spark's Kafka sink
    df.write.format("tierlog").options(**sink(broker)).mode("append").save()

    left = {(r.partition(), r.key(), r.value()) for r in read_all(broker, "sink-left")}
    assert left == {(2, b"k1", b"\x00binary\xff"), (1, b"k4", b"four")}
    right = {(r.partition(), r.key(), r.value()) for r in read_all(broker, "sink-right")}
    k3 = (murmur2(b"k3") & 0x7FFFFFFF) % PARTITIONS
    assert right == {(0, None, b"no key"), (k3, b"k3", None)}


def test_the_topic_option_overrides_the_topic_column(spark: Any, broker: BrokerProcess) -> None:
    create(broker, "sink-override")
    df = spark.createDataFrame([("elsewhere", "v")], "topic string, value string")
    df.write.format("tierlog").options(**sink(broker, topic="sink-override")).mode("append").save()
    assert [r.value() for r in read_all(broker, "sink-override")] == [b"v"]


@pytest.mark.parametrize(
    ("schema", "row", "options", "mode", "message"),
    [
        ("key string", ("k",), {"topic": "t"}, "append", "a 'value' column is required"),
        ("value int", (1,), {"topic": "t"}, "append", "column value must be string or binary"),
        ("value string, partition long", ("v", 1), {"topic": "t"}, "append",
         "column partition must be int"),
        ("value string", ("v",), {}, "append", "no topic: set the topic option"),
        ("value string", ("v",), {"topic": "t"}, "overwrite", "mode overwrite"),
        ("value string", ("v",), {"topic": "t", "kafka.transactional.id": "x"}, "append",
         "option kafka.transactional.id is not supported"),
        ("value string", ("v",), {"topic": "t", "kafka.no.such.setting": "1"}, "append",
         "a kafka.\\* producer option is not valid"),
    ],
)  # fmt: skip
def test_what_cannot_be_written_is_refused_with_its_reason(
    spark: Any,
    broker: BrokerProcess,
    schema: str,
    row: tuple[Any, ...],
    options: dict[str, str],
    mode: str,
    message: str,
) -> None:
    df = spark.createDataFrame([row], schema)
    with pytest.raises(Exception, match=message):
        df.write.format("tierlog").options(**sink(broker, **options)).mode(mode).save()


def test_a_write_to_no_broker_fails_within_the_message_timeout(spark: Any) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    started = time.monotonic()
    with pytest.raises(Exception, match="a row was not written"):
        df.write.format("tierlog").options(
            **{
                "kafka.bootstrap.servers": f"127.0.0.1:{closed_port()}",
                "topic": "nowhere",
                "kafka.message.timeout.ms": "3000",
            }
        ).mode("append").save()
    assert time.monotonic() - started < 60


def test_a_stream_copies_one_topic_into_another_once(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    create(broker, "sink-stream-in", "sink-stream-out")
    source = [(f"k{i}", f"v{i}") for i in range(200)]
    spark.createDataFrame(source, "key string, value string").write.format("tierlog").options(
        **sink(broker, topic="sink-stream-in")
    ).mode("append").save()

    def run() -> None:
        query = (
            spark.readStream.format("tierlog")
            .options(
                **{
                    "kafka.bootstrap.servers": broker.bootstrap,
                    "subscribe": "sink-stream-in",
                    "startingOffsets": "earliest",  # a stream's default is latest
                }
            )
            .load()
            .selectExpr("key", "upper(cast(value as string)) as value")
            .writeStream.format("tierlog")
            .options(**sink(broker, topic="sink-stream-out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        finished = query.awaitTermination(120)
        if not finished:
            query.stop()
        assert finished and query.exception() is None

    run()
    out = read_all(broker, "sink-stream-out")
    assert sorted((r.key(), r.value()) for r in out) == sorted(
        (k.encode(), v.upper().encode()) for k, v in source
    )
    run()  # nothing new in the source: the checkpoint says all of it was written
    assert len(read_all(broker, "sink-stream-out")) == len(source)
