"""The sink's options, columns and rows without Spark's session (sans-I/O parts of
``tierlog.spark.sink``), and its delivery loop against a stand-in producer."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from tierlog.spark.sink import (
    DEFAULT_MESSAGE_TIMEOUT_MS,
    SinkError,
    check_schema,
    parse_sink,
    produce_batches,
)


def test_options_pass_kafka_settings_to_the_producer_over_the_defaults() -> None:
    options = parse_sink(
        {"Kafka.Bootstrap.Servers": "h:1", "topic": " t ", "kafka.linger.ms": "50",
         "kafka.acks": "1", "checkpointLocation": "/x"}
    )  # fmt: skip
    assert (options.bootstrap, options.topic) == ("h:1", "t")
    config = options.producer_config()
    assert config["linger.ms"] == "50" and config["acks"] == "1"
    assert config["enable.idempotence"] is True
    assert config["partitioner"] == "murmur2_random"
    assert config["message.timeout.ms"] == DEFAULT_MESSAGE_TIMEOUT_MS
    assert "checkpointLocation" not in config and "checkpointlocation" not in config


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "kafka.bootstrap.servers is required"),
        ({"kafka.bootstrap.servers": "h:1", "topic": " "}, "option topic is empty"),
        ({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"},
         "kafka.value.serializer is not supported"),
        ({"kafka.bootstrap.servers": "h:1", "kafka.enable.idempotence": "false"},
         "always idempotent"),
    ],
)  # fmt: skip
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(SinkError, match=message):
        parse_sink(options)


B, S = BinaryType(), StringType()
HEADERS = ArrayType(StructType().add("key", S).add("value", B))


def columns(**types: DataType) -> StructType:
    return StructType([StructField(name, t) for name, t in types.items()])


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (columns(value=S, key=IntegerType()), "column key must be string or binary, not int"),
        (columns(value=B, topic=B), "column topic must be string"),
        (columns(value=B, partition=LongType()), "column partition must be int, not bigint"),
        (columns(value=B, headers=ArrayType(S)), "column headers must be array<struct"),
        (columns(value=B, headers=ArrayType(StructType().add("key", S).add("value", S))),
         "column headers must be"),
    ],
)  # fmt: skip
def test_columns_of_the_wrong_type_are_refused(schema: StructType, message: str) -> None:
    options = parse_sink({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    with pytest.raises(SinkError, match=message):
        check_schema(schema, options)


def test_kafka_sinks_columns_pass() -> None:
    options = parse_sink({"kafka.bootstrap.servers": "h:1"})
    check_schema(
        columns(key=B, value=S, topic=S, partition=IntegerType(), headers=HEADERS,
                other=DoubleType()),
        options,
    )  # fmt: skip


class Delivered:
    """What a delivery report names."""

    def __init__(self, topic: str) -> None:
        self._topic = topic

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0


class StandIn:
    """Records what is produced; at flush, reports each as failed with ``error`` (as
    ``delivery.report.only.error`` does, nothing is reported without one)."""

    def __init__(self, error: Any = None, queue_full: int = 0) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.pending: list[str] = []
        self.error = error
        self.queue_full = queue_full  # how many produce calls say the queue is full first
        self.on_failure: Any = None

    def __call__(self, options: Any, on_failure: Any) -> StandIn:
        self.on_failure = on_failure
        return self

    def produce(
        self, topic: str, value: Any = None, key: Any = None, partition: int = -1, **kw: Any
    ) -> None:
        if self.queue_full:
            self.queue_full -= 1
            raise BufferError("queue full")
        self.sent.append((topic, key, value, partition, kw.get("headers")))
        self.pending.append(topic)

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        for topic in self.pending:
            if self.error is not None:
                self.on_failure(self.error, Delivered(topic))
        self.pending = []
        return 0


def test_rows_become_records_and_a_full_queue_is_waited_out() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "key": ["a", None],
            "value": [b"1", None],
            "partition": pa.array([None, 2], pa.int32()),
            "headers": [[{"key": "h", "value": b"x"}], None],
        }
    )
    producer = StandIn(queue_full=2)
    options = parse_sink({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    done = produce_batches(options, [batch], producer)
    assert done.records == {"t": 2} and done.value_bytes == 1
    assert producer.sent == [
        ("t", b"a", b"1", -1, [("h", b"x")]),
        ("t", None, None, 2, None),
    ]
    simple = pa.RecordBatch.from_pydict({"key": ["k", None], "value": ["é", "w"]})
    producer = StandIn(queue_full=3)
    done = produce_batches(options, [simple], producer)
    assert producer.sent == [("t", b"k", "é".encode(), -1, None), ("t", None, b"w", -1, None)]
    assert done.records == {"t": 2} and done.value_bytes == 3


def test_an_undelivered_row_fails_the_task_and_a_row_without_topic_is_refused() -> None:
    failed = type("E", (), {"str": lambda s: "Broker: Message size too large"})()
    options = parse_sink({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    batch = pa.RecordBatch.from_pydict({"value": ["v"]})
    with pytest.raises(SinkError, match="t-0: Broker: Message size too large"):
        produce_batches(options, [batch], StandIn(error=failed))
    no_topic = pa.RecordBatch.from_pydict({"value": ["v"], "topic": [None]})
    with pytest.raises(SinkError, match="null or empty topic"):
        produce_batches(parse_sink({"kafka.bootstrap.servers": "h:1"}), [no_topic], StandIn())


def test_a_row_refused_before_sending_fails_the_task_with_its_reason() -> None:
    class Refusing(StandIn):
        def produce(self, topic: str, *args: Any, **kwargs: Any) -> None:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))

    options = parse_sink({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    batch = pa.RecordBatch.from_pydict({"value": ["v", "w"]})
    with pytest.raises(SinkError, match=r"a row was not written: t: .*too large"):
        produce_batches(options, [batch], Refusing())


SECURE_SINK = {
    "kafka.bootstrap.servers": "h:1",
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "SCRAM-SHA-256",
    "kafka.sasl.jaas.config": (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="etl" password="etl-secret";'
    ),
    "kafka.ssl.truststore.location": "/etc/ca.pem",
    "kafka.linger.ms": "7",
}


def test_security_options_go_to_librdkafka_in_its_own_keys() -> None:
    options = parse_sink(SECURE_SINK)
    config = options.producer_config()
    assert config["security.protocol"] == "sasl_ssl"
    assert (config["sasl.username"], config["sasl.password"]) == ("etl", "etl-secret")
    assert config["ssl.ca.location"] == "/etc/ca.pem"
    assert "sasl.jaas.config" not in config and config["linger.ms"] == "7"
    assert "etl-secret" not in repr(options)


def test_a_bad_security_option_is_refused_by_name() -> None:
    with pytest.raises(SinkError, match=r"kafka\.sasl\.login\.class") as refused:
        parse_sink({**SECURE_SINK, "kafka.sasl.login.class": "x"})
    assert "etl-secret" not in str(refused.value)


def test_a_producer_error_quoting_a_secret_hides_it() -> None:
    options = parse_sink(SECURE_SINK)
    text = options.hide_secrets('Invalid value "etl-secret" for sasl.password')
    assert "etl-secret" not in text and "[hidden]" in text
