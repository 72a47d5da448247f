"""``tierlog produce`` and ``tierlog consume``: the console producer and consumer, like
Kafka's ``kafka-console-producer.sh`` and ``kafka-console-consumer.sh``, on confluent-kafka.

The producer sends each stdin line as one message (``key<SEP>value`` with a key separator),
idempotently when acks=all, and reports how many were delivered and every failure. The
consumer prints one message per line; with a group it subscribes and commits what it
printed, without one it assigns partitions itself and commits nothing.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from tierlog.tools.client_config import ClientSettings, ToolError

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message

# Delivery failures printed one by one before only counting the rest.
_SHOWN_FAILURES = 10
# How long one consumer poll may block: short, so Ctrl-C and the idle timeout act quickly.
_POLL_SECONDS = 0.2


def _check_topic(settings: ClientSettings, client: Any, topic: str) -> list[int]:
    """The topic's partition ids; ToolError if it does not exist or the broker is away."""
    metadata = settings.metadata(client, f"look up topic {topic!r}", topic=topic)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        reason = described.error.str() if described is not None and described.error else ""
        raise ToolError(f"Topic '{topic}' does not exist" + (f" ({reason})" if reason else ""))
    return sorted(described.partitions)


class _Deliveries:
    """Counts delivery reports and prints the first failures."""

    def __init__(self, err: TextIO) -> None:
        self.delivered = 0
        self.failed = 0
        self.err = err

    def failure(self, text: str) -> None:
        self.failed += 1
        if self.failed <= _SHOWN_FAILURES:
            print(f"tierlog: {text}", file=self.err)

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.failure(f"delivery failed (partition {message.partition()}): {error.str()}")


def produce(
    settings: ClientSettings,
    topic: str,
    lines: Iterable[bytes],
    err: TextIO,
    *,
    key_separator: str | None = None,
    compression: str | None = None,
    acks: str | None = None,
    partition: int | None = None,
) -> int:
    """Send each line (without its line ending) as one message; returns 1 if any failed.

    Args:
        key_separator: split each line at its first occurrence into key and value; a line
            without it is a failure, as in Kafka's console producer.
        compression, acks: override ``--command-config``; by default ``none`` and ``all``.
        partition: send every message to this partition instead of the partitioner's choice.
    """
    from confluent_kafka import Producer

    acks = acks or settings.properties.get("acks", "all")
    overrides: dict[str, Any] = {"acks": acks}
    if compression:
        overrides["compression.type"] = compression
    if "enable.idempotence" not in settings.properties:
        # Idempotence (KIP-98) needs acks=all; asking for less turns it off, as Kafka's
        # producer does since 3.2 when idempotence was not set explicitly.
        overrides["enable.idempotence"] = acks in ("all", "-1")
    producer = Producer(settings.config(defaults={"linger.ms": 5}, overrides=overrides))
    partitions = _check_topic(settings, producer, topic)
    if partition is not None and partition not in partitions:
        raise ToolError(f"topic '{topic}' has no partition {partition} (it has {len(partitions)})")
    report = _Deliveries(err)
    separator = key_separator.encode() if key_separator else None
    try:
        for number, line in enumerate(lines, start=1):
            value = line.removesuffix(b"\n").removesuffix(b"\r")
            key = None
            if separator is not None:
                key, found, value = value.partition(separator)
                if not found:
                    report.failure(f"line {number}: no key separator {key_separator!r}")
                    continue
            _send(producer, topic, key, value, -1 if partition is None else partition, report)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends the input like Ctrl-D: what was read is still delivered
    # Deliveries are bounded by delivery.timeout.ms; short flushes keep Ctrl-C responsive.
    while producer.flush(1.0) > 0:
        pass
    if report.failed > _SHOWN_FAILURES:
        print(f"tierlog: ... {report.failed - _SHOWN_FAILURES} more failure(s)", file=err)
    print(
        f"Produced {report.delivered} message(s) to {topic}"
        + (f"; {report.failed} failed" if report.failed else ""),
        file=err,
    )
    return 1 if report.failed else 0


def _send(
    producer: Any, topic: str, key: bytes | None, value: bytes, partition: int, report: _Deliveries
) -> None:
    from confluent_kafka import KafkaException

    while True:
        try:
            producer.produce(topic, value, key, partition=partition, on_delivery=report)
        except BufferError:
            producer.poll(0.1)  # local queue full: let deliveries drain it
            continue
        except KafkaException as exc:
            report.failure(f"produce failed: {exc.args[0].str()}")
        producer.poll(0)
        return


def _start_offset(offset: str | None, from_beginning: bool) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if offset is None:
        return OFFSET_BEGINNING if from_beginning else OFFSET_END
    if offset == "earliest":
        return OFFSET_BEGINNING
    if offset == "latest":
        return OFFSET_END
    if not offset.isdigit():
        raise ToolError(f"--offset expects a non-negative integer, earliest or latest: {offset!r}")
    return int(offset)


class _Printer:
    """Writes messages as lines (``kafka-console-consumer`` style) and counts them."""

    def __init__(self, out: BinaryIO, print_key: bool, print_offset: bool) -> None:
        self.out = out
        self.print_key = print_key
        self.print_offset = print_offset
        self.count = 0

    def write(self, message: Message) -> None:
        parts: list[bytes] = []
        if self.print_offset:
            parts.append(f"Partition:{message.partition()}\tOffset:{message.offset()}".encode())
        if self.print_key:
            key = message.key()
            parts.append(b"null" if key is None else key)
        value = message.value()
        parts.append(b"null" if value is None else value)
        self.out.write(b"\t".join(parts) + b"\n")
        self.out.flush()
        self.count += 1


def _poll_loop(
    consumer: Any,
    settings: ClientSettings,
    topic: str,
    printer: _Printer,
    err: TextIO,
    *,
    store_offsets: bool,
    max_messages: int | None,
    timeout_ms: int | None,
) -> None:
    """Print messages until ``max_messages`` are printed or none came for ``timeout_ms``."""
    from confluent_kafka import KafkaError

    idle_limit = None if timeout_ms is None else timeout_ms / 1000
    last_activity = time.monotonic()
    while max_messages is None or printer.count < max_messages:
        message = consumer.poll(_POLL_SECONDS)
        if message is None:
            if idle_limit is not None and time.monotonic() - last_activity >= idle_limit:
                return
            continue
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                continue
            if error.fatal() or error.code() in (
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError.TOPIC_AUTHORIZATION_FAILED,
                KafkaError.GROUP_AUTHORIZATION_FAILED,
            ):
                raise settings.error(error, f"consume {topic!r}")
            print(f"tierlog: consumer: {error.str()}", file=err)
            continue
        printer.write(message)
        last_activity = time.monotonic()
        if store_offsets:
            consumer.store_offsets(message=message)


def consume(
    settings: ClientSettings,
    topic: str,
    out: BinaryIO,
    err: TextIO,
    *,
    group: str | None = None,
    from_beginning: bool = False,
    offset: str | None = None,
    partition: int | None = None,
    max_messages: int | None = None,
    timeout_ms: int | None = None,
    print_key: bool = False,
    print_offset: bool = False,
) -> int:
    """Print messages, one per line, until ``max_messages`` or ``timeout_ms`` without one.

    Args:
        group: subscribe as this consumer group (or ``group.id`` of ``--command-config``)
            and commit each printed message's offset; without it, assign the partitions.
        from_beginning: start where the log starts when there is no committed offset;
            otherwise at its end (``auto.offset.reset``).
        offset: without a group, start every assigned partition here (an offset,
            ``earliest`` or ``latest``).
        partition: without a group, read only this partition.
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    group = group or settings.properties.get("group.id")
    if group is not None and (offset is not None or partition is not None):
        raise ToolError("--offset and --partition cannot be used with a consumer group")
    start = _start_offset(offset, from_beginning)
    overrides: dict[str, Any] = {
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        # A group commits only what was printed: offsets are stored by hand below.
        "enable.auto.offset.store": False,
        "enable.auto.commit": group is not None,
    }
    # librdkafka wants a group id even to assign(); Kafka's console consumer names its
    # throwaway groups the same way.
    overrides["group.id"] = group or f"console-consumer-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(settings.config(overrides=overrides))
    printer = _Printer(out, print_key, print_offset)
    try:
        partitions = _check_topic(settings, consumer, topic)
        if group is not None:
            consumer.subscribe([topic])
        else:
            if partition is not None and partition not in partitions:
                raise ToolError(
                    f"topic '{topic}' has no partition {partition} (it has {len(partitions)})"
                )
            chosen = partitions if partition is None else [partition]
            consumer.assign([TopicPartition(topic, p, start) for p in chosen])
        # Ctrl-C is how an unbounded console consumer ends: not an error.
        with contextlib.suppress(KeyboardInterrupt):
            _poll_loop(
                consumer,
                settings,
                topic,
                printer,
                err,
                store_offsets=group is not None,
                max_messages=max_messages,
                timeout_ms=timeout_ms,
            )
        print(f"Processed a total of {printer.count} messages", file=err)
        if group is not None and printer.count:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._NO_OFFSET:
                    raise settings.error(exc, f"commit offsets of group {group!r}") from None
    finally:
        consumer.close()
    return 0
