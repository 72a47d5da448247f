"""Writing DataFrames to topics: ``df.write.format("tierlog").mode("append")`` and
``df.writeStream.format("tierlog")``, the sink half of Spark's Kafka integration. (Spark
lets a Python data source be written in mode append or overwrite only, so unlike
``format("kafka")`` the batch write names ``mode("append")``; overwrite is refused, since a
log's records cannot be replaced.)

The columns are those of Spark's Kafka sink: ``value`` (required; string or binary, null
for a tombstone), ``key`` (string or binary), ``topic`` (string; the ``topic`` option
overrides it), ``partition`` (int; null or absent: the partitioner chooses) and
``headers`` (array of ``struct<key: string, value: binary>``). Other columns are ignored,
as Spark's sink ignores them. The options are ``kafka.bootstrap.servers``, ``topic`` and
any producer setting prefixed ``kafka.`` (librdkafka's names, which are the Java client's
for the common ones: ``kafka.acks``, ``kafka.linger.ms``, ``kafka.compression.type``...).
Security options are the source's, Kafka's client keys as Spark's Kafka sink takes them
(``kafka.security.protocol``, ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``
...; ``tierlog.spark.options.kafka_security``), said to librdkafka in its own words
(``librdkafka_config``). They are secrets: no repr, log or error shows them.

Delivery is at least once, as with Spark's Kafka sink: each task produces its rows with an
idempotent producer and succeeds only once every row is acknowledged; a failed task is
retried by Spark and may write some of its rows twice. For exactly once into a table, see
``pipelines/exactly_once.py``. Keyed rows go to the partition Java producers (and Spark's
sink) pick for the key (``murmur2_random``, not librdkafka's CRC32 default), so a key's
records land in one partition whoever wrote them.

Split: ``SinkOptions``/``parse_sink`` and ``check_schema`` run on the driver, without
Spark's session; ``produce_batches`` runs in each task on the Arrow batches Spark hands
it. The writer classes are thin.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from tierlog.security.client_config import ClientSecurity, librdkafka_config
from tierlog.security.password import HIDDEN, is_secret_key
from tierlog.spark.options import SECURITY_PREFIXES, kafka_security
from tierlog.util.configdef import ConfigError

log = logging.getLogger(__name__)

KAFKA_PREFIX = "kafka."
# Java's delivery.timeout.ms default (Spark's sink uses it); librdkafka's own is 5 min.
DEFAULT_MESSAGE_TIMEOUT_MS = 120_000
# Producer settings the sink owns: Spark's sink refuses the serializers for the same reason
# (rows are bytes already), and the rest are its delivery guarantee.
_REFUSED = {
    "key.serializer": "keys are written as the column's bytes (UTF-8 for strings)",
    "value.serializer": "values are written as the column's bytes (UTF-8 for strings)",
    "transactional.id": "the sink writes at least once; pipelines/exactly_once.py writes "
    "exactly once",
    "enable.idempotence": "the sink's producer is always idempotent",
}


class SinkError(ValueError):
    """A write cannot be done as asked: bad options or columns, or a row not delivered."""


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None
    producer: dict[str, str] = field(default_factory=dict)
    # Kafka's client security keys (``kafka.`` stripped), secrets included: never shown.
    security: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def producer_config(self) -> dict[str, Any]:
        """The confluent-kafka producer configuration: the sink's defaults, then the
        user's ``kafka.*`` settings, then the security settings in librdkafka's keys."""
        secured = (
            librdkafka_config(ClientSecurity.from_config(dict(self.security)))
            if self.security
            else {}
        )
        return {
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "message.timeout.ms": DEFAULT_MESSAGE_TIMEOUT_MS,
            "linger.ms": 5,
            "log_level": 4,  # warnings and up: librdkafka's info lines are noise in a task
            **self.producer,
            **secured,
        }

    def hide_secrets(self, text: str) -> str:
        """``text`` with every secret value of these options replaced by ``[hidden]`` (a
        librdkafka error may quote the value it refused)."""
        secrets = [v for v in _secret_values(self.security) if len(v) >= 3]
        for value in sorted(secrets, key=len, reverse=True):
            text = text.replace(value, HIDDEN)
        return text


def _secret_values(security: tuple[tuple[str, str], ...]) -> list[str]:
    """The secret values among the security options and what librdkafka is given."""
    values = [v for k, v in security if is_secret_key(k)]
    if security:
        try:
            translated = librdkafka_config(ClientSecurity.from_config(dict(security)))
        except ConfigError:
            translated = {}
        values += [v for k, v in translated.items() if is_secret_key(k)]
    return values


def parse_sink(options: Mapping[str, str]) -> SinkOptions:
    """The sink's options (names case-insensitive, as PySpark lower-cases them).

    Raises:
        SinkError: naming the option.
    """
    lowered = {k.lower(): v for k, v in options.items()}
    bootstrap = lowered.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise SinkError("option kafka.bootstrap.servers is required: the brokers to write to")
    topic = lowered.get("topic")
    if topic is not None and not topic.strip():
        raise SinkError("option topic is empty: give a topic name, or leave it out and "
                        "give each row's topic in a 'topic' column")  # fmt: skip
    try:
        security = kafka_security(lowered)
    except ConfigError as exc:
        raise SinkError(f"option {exc.key}: {exc.reason}") from None
    producer: dict[str, str] = {}
    for key, value in lowered.items():
        if not key.startswith(KAFKA_PREFIX) or key == "kafka.bootstrap.servers":
            continue
        if key.startswith(SECURITY_PREFIXES):
            continue  # security, above
        name = key[len(KAFKA_PREFIX) :]
        if name in _REFUSED:
            raise SinkError(f"option {key} is not supported: {_REFUSED[name]}")
        producer[name] = value
    return SinkOptions(bootstrap, topic.strip() if topic else None, producer, security)


def check_schema(schema: StructType, options: SinkOptions) -> None:
    """Refuse, on the driver, what the tasks could not write (Spark's ``validateQuery``).

    Raises:
        SinkError: naming the column and the types it may have.
    """
    types = {f.name.lower(): f.dataType for f in schema.fields}

    def check(name: str, allowed: tuple[type[DataType], ...], what: str) -> None:
        found = types.get(name)
        if found is not None and not isinstance(found, allowed):
            raise SinkError(f"column {name} must be {what}, not {found.simpleString()}")

    if "value" not in types:
        raise SinkError("a 'value' column is required (string or binary; null for a tombstone)")
    check("value", (StringType, BinaryType), "string or binary")
    check("key", (StringType, BinaryType), "string or binary")
    check("topic", (StringType,), "string")
    check("partition", (IntegerType,), "int")
    headers = types.get("headers")
    if headers is not None and not _headers_type(headers):
        raise SinkError(
            "column headers must be array<struct<key: string, value: binary>>, not "
            f"{headers.simpleString()}"
        )
    if options.topic is None and "topic" not in types:
        raise SinkError(
            "no topic: set the topic option, or give each row's topic in a 'topic' column"
        )


def _headers_type(found: DataType) -> bool:
    if not isinstance(found, ArrayType) or not isinstance(found.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in found.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], BinaryType)
    )


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task wrote: records and value bytes per topic."""

    records: dict[str, int] = field(default_factory=dict)
    value_bytes: int = 0


def produce_batches(
    options: SinkOptions,
    batches: Iterable[pa.RecordBatch],
    make_producer: Callable[[SinkOptions, Callable[[Any, Any], None]], Any] | None = None,
) -> SinkCommit:
    """Produce every row of ``batches`` and wait until each is acknowledged.

    The loop is per row in Python, so it does as little per row as it can: columns come
    out of Arrow as bytes (strings cast to binary, which copies nothing), ``produce`` is
    called with positional arguments, and delivery reports come back only for failures
    (``delivery.report.only.error``): a report per acknowledged row was a Python call each.

    Args:
        make_producer: makes the producer from the options and the callback its failed
            deliveries go to (tests); default, a confluent-kafka Producer (``_producer``).

    Raises:
        SinkError: a row was refused or not acknowledged in time (the first such error,
            with its topic and partition); a row with no topic; a bad producer setting.
    """
    from confluent_kafka import KafkaException

    errors: list[str] = []

    def failed(err: Any, msg: Any) -> None:
        if err is not None and not errors:
            errors.append(f"{msg.topic()}-{msg.partition()}: {err.str()}")

    producer = (make_producer or _producer)(options, failed)
    produce = producer.produce
    done = SinkCommit()
    for batch in batches:
        rows = _Rows(batch, options.topic)
        topic = options.topic
        try:
            if rows.simple:
                for key, value in zip(rows.keys, rows.values, strict=True):
                    while True:
                        try:
                            produce(topic, value, key)
                            break
                        except BufferError:  # the local queue is full: deliveries drain it
                            producer.poll(0.1)
            else:
                for topic, key, value, partition, headers in rows:
                    while True:
                        try:
                            produce(topic, value, key, partition, headers=headers)
                            break
                        except BufferError:
                            producer.poll(0.1)
        except KafkaException as exc:  # refused before sending (e.g. too large)
            errors.append(f"{topic}: {exc.args[0].str() if exc.args else exc}")
        rows.count(done)
        producer.poll(0)
        if errors:
            break
    _flush(producer, options)
    if errors:
        raise SinkError(f"a row was not written: {errors[0]}")
    return done


def _producer(options: SinkOptions, on_failure: Callable[[Any, Any], None]) -> Any:
    from confluent_kafka import KafkaException, Producer

    config = {**options.producer_config(), "on_delivery": on_failure}
    config.setdefault("delivery.report.only.error", True)
    try:
        return Producer(config)
    except (KafkaException, ValueError, TypeError) as exc:
        raise SinkError(
            f"a kafka.* producer option is not valid: {options.hide_secrets(str(exc))}"
        ) from None


def _flush(producer: Any, options: SinkOptions) -> None:
    """Wait for every produced row's acknowledgement, or its failure, within the
    producer's message timeout (each row then has its answer: acknowledged or failed)."""
    config = options.producer_config()
    # delivery.timeout.ms is librdkafka's alias of message.timeout.ms (the Java name).
    timeout_ms = config.get("delivery.timeout.ms", config["message.timeout.ms"])
    timeout_s = int(timeout_ms) / 1000 + 5
    deadline = time.monotonic() + timeout_s
    while producer.flush(1.0) > 0:
        if time.monotonic() > deadline:
            raise SinkError(f"rows not acknowledged within {timeout_s:.0f} s")


class _Rows:
    """One Arrow batch's rows as Python lists of bytes, column by column; iterating gives
    (topic, key, value, partition, headers) per row. ``simple``: the rows need only the
    topic option, a key and a value (no topic, partition or headers column)."""

    def __init__(self, batch: pa.RecordBatch, topic_option: str | None) -> None:
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        self.n = n = batch.num_rows

        def column(name: str, as_bytes: bool = False) -> list[Any] | None:
            i = names.get(name)
            if i is None:
                return None
            data = batch.column(i)
            if as_bytes and pa.types.is_string(data.type):
                data = data.cast(pa.binary())  # the same bytes: UTF-8, no copy
            return data.to_pylist()

        self.values = column("value", as_bytes=True) or [None] * n
        self.keys = column("key", as_bytes=True) or [None] * n
        self.topic_option = topic_option
        self.topics = None if topic_option else column("topic")
        self.partitions = column("partition")
        self.headers = column("headers")
        self.simple = topic_option is not None and self.partitions is None and not self.headers
        self._produced = 0

    def __iter__(self) -> Iterator[tuple[str, Any, Any, int, list[tuple[str, Any]] | None]]:
        for i in range(self.n):
            topic = self.topic_option or (self.topics[i] if self.topics else None)
            if not topic:
                raise SinkError("a row has a null or empty topic, and no topic option is set")
            partition = self.partitions[i] if self.partitions else None
            headers = self.headers[i] if self.headers else None
            self._produced = i
            yield (
                topic,
                self.keys[i],
                self.values[i],
                -1 if partition is None else partition,  # -1: the partitioner picks
                [(h["key"], h["value"]) for h in headers] if headers else None,
            )
            self._produced = i + 1

    def count(self, done: SinkCommit) -> None:
        """Add what this batch produced to ``done`` (all of it, or up to a failure)."""
        if self.simple:
            assert self.topic_option is not None
            rows: Iterable[int] = range(self.n)
            done.records[self.topic_option] = done.records.get(self.topic_option, 0) + self.n
        else:
            rows = range(self._produced)
            for i in rows:
                topic = self.topic_option or (self.topics[i] if self.topics else "")
                done.records[topic] = done.records.get(topic, 0) + 1
        done.value_bytes += sum(len(self.values[i] or b"") for i in rows)


class TierlogBatchWriter(DataSourceArrowWriter):
    """``df.write.format("tierlog")``: each task produces its rows (``produce_batches``)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_written(messages, "write")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # A log cannot take records back: what the finished tasks wrote stays.
        log.warning("write aborted; %s stay in the log", _summary(messages))


class TierlogStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("tierlog")``: each micro-batch as a batch write."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_written(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("micro-batch %d aborted; %s stay in the log", batchId, _summary(messages))


def _summary(messages: list[WriterCommitMessage | None]) -> str:
    records: dict[str, int] = {}
    for m in messages:
        if isinstance(m, SinkCommit):
            for topic, n in m.records.items():
                records[topic] = records.get(topic, 0) + n
    if not records:
        return "no records"
    return ", ".join(f"{n} records in {topic}" for topic, n in sorted(records.items()))


def _log_written(messages: list[WriterCommitMessage | None], what: str) -> None:
    log.info("%s: %s written", what, _summary(messages))
