"""Exactly-once consume-transform-produce between two topics, then into Delta.

Two stages, each safe to kill and re-run at any point:

1. **transform** (``transform``): a confluent-kafka consumer (``isolation.level=
   read_committed``, no auto-commit) reads the source topic's partitions, ``enrich``
   turns each activity event into one output record, and a transactional producer writes
   them to the sink topic. Each transaction carries a batch (``transaction_records``
   records or ``transaction_ms``, whichever comes first) *and* the consumer's next offsets
   (``send_offsets_to_transaction``), so output and input progress commit or abort
   together: Kafka's EOS loop (KIP-98, KIP-447). An abortable error aborts the transaction
   and rewinds the consumer to the last committed offsets; a fatal one (fenced) stops it.
   The ``transactional.id`` is a function of the job (``group_id``) and its input
   partitions, so a restarted job's ``init_transactions`` fences the instance it replaces
   and aborts that instance's open transaction before reading its committed offsets.
2. **to_delta** (``to_delta``): the sink topic into a Delta table with ``pipelines.ingest``
   (offsets kept in the table, Delta ``txnAppId``/``txnVersion``), read with
   ``kafka.isolation.level=read_committed``: a killed transform's aborted output is never
   read, and a run ends at the last stable offset, so an open transaction is read once it
   commits, by a later run.

A run of the job processes the source up to its last stable offset as of the start and
stops. Every input record gives exactly one output record (``enrich`` marks records that
are not activity events instead of dropping them), so the table's rows equal the input
records the group has committed, and each row names its input record (``source``).

    python -m pipelines.exactly_once transform --set bootstrap_servers=... [--set ...]
    python -m pipelines.exactly_once to_delta --config FILE [--set key=value ...]
    python -m pipelines.exactly_once --config FILE     # both stages, in order

Size: ~620 lines, just past the ~600 guideline, kept as one module on purpose: the two
stages are one exactly-once argument (the transform's transactional ids, offsets and
one-output-per-input rule are what make the Delta stage's row count provable), the
notebooks and tests import both stages from here, and each half alone would hide that.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines import client_security
from pipelines.common import (
    EXIT_CONFIG,
    Key,
    TopicSource,
    as_json,
    load_config,
    main,
    non_empty,
    positive,
    table_location,
)
from pipelines.ingest import IngestPlan, IngestResult, plan_ingest, write_ingest

DEFAULT_GROUP = "tierlog-exactly-once"
# The demo's pages (tierlog.tools.activity.PAGES) by section of the site.
SECTIONS = {
    "/": "browse",
    "/search": "browse",
    "/blog": "browse",
    "/product": "shop",
    "/cart": "shop",
    "/checkout": "shop",
    "/help": "support",
    "/account": "support",
}
# Per blocking client call (init, send offsets, commit, abort): librdkafka's own default
# for transactional calls is the transaction timeout, a minute.
CALL_TIMEOUT_S = 30.0
# An abort redoes the batch; a cause that comes back this many times in a row will not go.
ABORTS_IN_A_ROW = 5


# -- the transform ---------------------------------------------------------------------------


def enrich(value: bytes | None, topic: str, partition: int, offset: int) -> dict[str, Any]:
    """The output of one input record: the activity event (JSON) with its site ``section``
    and ``valid: true``; anything else becomes ``valid: false`` with the ``raw`` text. Both
    carry ``source`` (topic, partition, offset of the input record). A pure function of its
    arguments, so a record processed twice gives the same output."""
    source = {"topic": topic, "partition": partition, "offset": offset}
    try:
        event = json.loads(value) if value is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        event = None
    if isinstance(event, dict) and isinstance(event.get("page"), str):
        section = SECTIONS.get(event["page"], "other")
        return {**event, "section": section, "valid": True, "source": source}
    raw = None if value is None else value.decode("utf-8", "replace")
    return {"raw": raw, "valid": False, "source": source}


def encode(output: Mapping[str, Any]) -> bytes:
    """An output record's value: compact JSON, keys sorted (the same bytes every time)."""
    return json.dumps(output, separators=(",", ":"), sort_keys=True).encode()


def transactional_id(group_id: str, topic: str, partitions: Sequence[int]) -> str:
    """One job's ``transactional.id``: the same for the same job and input partitions, so
    a restart fences its predecessor (two jobs must not share one)."""
    return f"{group_id}:{topic}:{','.join(str(p) for p in sorted(partitions))}"


@dataclass(frozen=True)
class TransformResult:
    """What one run of stage 1 did.

    ``start_offsets``/``end_offsets``: the group's committed offsets per partition before
    and after (-1: none committed before); ``invalid``: output records marked invalid;
    ``aborted``: transactions aborted on an abortable error (their batches were redone).
    """

    transactional_id: str
    records: int
    invalid: int
    transactions: int
    aborted: int
    start_offsets: dict[int, int] = field(default_factory=dict)
    end_offsets: dict[int, int] = field(default_factory=dict)


def transform(
    *,
    bootstrap_servers: str,
    source_topic: str,
    sink_topic: str,
    group_id: str = DEFAULT_GROUP,
    partitions: Sequence[int] | None = None,
    transaction_records: int = 500,
    transaction_ms: int = 1000,
    commit_delay_ms: int = 0,
    timeout_s: float = 600.0,
    progress: Callable[[str], None] | None = None,
) -> TransformResult:
    """Stage 1: process the source's records up to its last stable offset now into the
    sink, exactly once (see the module docstring). The sink is created with the source's
    partitions, replication factor and retention when missing.

    Args:
        group_id: the consumer group holding the job's offsets, and the job's name.
        partitions: the source partitions this job owns (None: all of them); jobs that
            split a topic between them own disjoint sets.
        transaction_records, transaction_ms: a transaction ends at this many records or
            after this long collecting them, whichever comes first.
        commit_delay_ms: a pause between a transaction's last write and its commit, with
            the records flushed to the broker: the crash window, held open for a demo or
            a test. 0 in production.
        timeout_s: give up when the source's end is not reached in this time.
        progress: called with a line after each transaction.

    Raises:
        KafkaException: a fatal client error (e.g. fenced by a newer instance).
        RuntimeError: ``ABORTS_IN_A_ROW`` transactions in a row were aborted.
        TimeoutError: the end was not reached within ``timeout_s``.
    """
    from confluent_kafka import Consumer, Producer

    report = progress or (lambda line: None)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "log_level": 4,  # warnings and up: librdkafka's info lines are noise in a run
            **client_security.librdkafka(),
        }
    )
    try:
        owned = sorted(partitions) if partitions else _partitions(consumer, source_topic)
        _ensure_sink(bootstrap_servers, source_topic, sink_topic, consumer)
        txn_id = transactional_id(group_id, source_topic, owned)
        producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "transactional.id": txn_id,
                "linger.ms": 5,
                "log_level": 4,
                **client_security.librdkafka(),
            }
        )
        # First: fences the instance this one replaces and aborts its open transaction,
        # whose pending offsets would otherwise hold the committed offsets read next.
        producer.init_transactions(CALL_TIMEOUT_S)
        loop = _Loop(consumer, producer, source_topic, sink_topic, owned, report)
        start = dict(loop.committed)
        loop.run(transaction_records, transaction_ms / 1000, commit_delay_ms / 1000, timeout_s)
        return TransformResult(
            transactional_id=txn_id,
            records=loop.records,
            invalid=loop.invalid,
            transactions=loop.transactions,
            aborted=loop.aborted,
            start_offsets=start,
            end_offsets=dict(loop.committed),
        )
    finally:
        consumer.close()


class _Loop:
    """Kafka's EOS loop over one consumer and one transactional producer; single-threaded.

    ``committed`` is the group's committed offset per owned partition (-1: none), kept in
    step with each commit: the producer is the group's only writer, or is fenced.
    """

    def __init__(
        self,
        consumer: Any,
        producer: Any,
        source: str,
        sink: str,
        partitions: list[int],
        report: Callable[[str], None],
    ) -> None:
        from confluent_kafka import TopicPartition

        self.consumer, self.producer = consumer, producer
        self.source, self.sink, self.report = source, sink, report
        wanted = [TopicPartition(source, p) for p in partitions]
        got = consumer.committed(wanted, timeout=CALL_TIMEOUT_S)
        self.committed = {tp.partition: max(tp.offset, -1) for tp in got}
        # The end of this run: the last stable offset now (read_committed watermarks).
        self.ends = {
            p: consumer.get_watermark_offsets(TopicPartition(source, p), CALL_TIMEOUT_S)[1]
            for p in partitions
        }
        self.records = self.invalid = self.transactions = self.aborted = 0
        self._rewind()

    def _rewind(self) -> None:
        """Position the consumer at the committed offsets (the start, or after an abort)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self.done = {p: self.committed[p] >= self.ends[p] for p in self.committed}
        self.consumer.assign(
            [
                TopicPartition(self.source, p, o if o >= 0 else OFFSET_BEGINNING)
                for p, o in self.committed.items()
            ]
        )

    def run(self, max_records: int, max_s: float, delay_s: float, timeout_s: float) -> None:
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + timeout_s
        in_a_row = 0
        while not all(self.done.values()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.source} not processed to {self.ends} in {timeout_s} s")
            batch, offsets = self._collect(max_records, max_s)
            if not batch:
                continue
            try:
                self._transaction(batch, offsets, delay_s)
                in_a_row = 0
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal():
                    raise  # fenced by a newer instance, ...: this one must stop
                # Anything else leaves the transaction abortable (librdkafka reports the
                # cause on the call that met it, not always as txn_requires_abort): abort,
                # and redo the batch from the committed offsets. Always safe; the bound
                # stops a cause that comes back every time (a record the sink refuses).
                self.producer.abort_transaction(CALL_TIMEOUT_S)
                self.aborted += 1
                in_a_row += 1
                self.report(f"transaction aborted ({error}); rewound to {self.committed}")
                if in_a_row >= ABORTS_IN_A_ROW:
                    raise RuntimeError(
                        f"{in_a_row} transactions aborted in a row: {error}"
                    ) from exc
                self._rewind()

    def _collect(self, max_records: int, max_s: float) -> tuple[list[Any], dict[int, int]]:
        """Up to ``max_records`` records, collected for at most ``max_s``, and the next
        offset of each partition they came from."""
        from confluent_kafka import KafkaError, KafkaException

        batch: list[Any] = []
        offsets: dict[int, int] = {}
        until = time.monotonic() + max_s
        while len(batch) < max_records and not all(self.done.values()):
            left = until - time.monotonic()
            if left <= 0:
                break
            for msg in self.consumer.consume(max_records - len(batch), min(left, 0.5)):
                error = msg.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    # At the last stable offset, which is at or past this run's end.
                    self.done[msg.partition()] = True
                elif error is not None:
                    raise KafkaException(error)
                else:
                    batch.append(msg)
                    offsets[msg.partition()] = msg.offset() + 1
                    if msg.offset() + 1 >= self.ends[msg.partition()]:
                        self.done[msg.partition()] = True
        return batch, offsets

    def _transaction(self, batch: list[Any], offsets: dict[int, int], delay_s: float) -> None:
        """The batch's output and its input offsets, in one transaction."""
        from confluent_kafka import TopicPartition

        producer = self.producer
        producer.begin_transaction()
        invalid = 0
        for msg in batch:
            output = enrich(msg.value(), self.source, msg.partition(), msg.offset())
            invalid += not output["valid"]
            self._produce(msg.key(), encode(output), msg.timestamp()[1])
        producer.send_offsets_to_transaction(
            [TopicPartition(self.source, p, o) for p, o in offsets.items()],
            self.consumer.consumer_group_metadata(),
            CALL_TIMEOUT_S,
        )
        number = self.transactions + 1
        if delay_s > 0:
            producer.flush(CALL_TIMEOUT_S)  # the records in the log, uncommitted
            self.report(f"transaction {number}: {len(batch)} records written, committing")
            time.sleep(delay_s)
        producer.commit_transaction(CALL_TIMEOUT_S)
        self.committed.update(offsets)
        self.transactions = number
        self.records += len(batch)
        self.invalid += invalid
        self.report(f"transaction {number} committed: {len(batch)} records, offsets {offsets}")

    def _produce(self, key: bytes | None, value: bytes, timestamp_ms: int) -> None:
        while True:
            try:
                self.producer.produce(self.sink, value, key, timestamp=timestamp_ms)
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.1)


def _partitions(consumer: Any, topic: str) -> list[int]:
    metadata = consumer.list_topics(topic, timeout=CALL_TIMEOUT_S).topics[topic]
    if metadata.error is not None:
        from confluent_kafka import KafkaException

        raise KafkaException(metadata.error)
    return sorted(metadata.partitions)


def _ensure_sink(bootstrap: str, source: str, sink: str, consumer: Any) -> None:
    """Create ``sink`` unless it exists, with ``source``'s partitions, replication factor
    and retention: output records keep their input's timestamps, so a sink with a shorter
    retention.ms than the source would delete old events as soon as they land."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

    admin = AdminClient(
        {"bootstrap.servers": bootstrap, "log_level": 4, **client_security.librdkafka()}
    )
    if sink in admin.list_topics(timeout=CALL_TIMEOUT_S).topics:
        return
    metadata = consumer.list_topics(source, timeout=CALL_TIMEOUT_S).topics[source]
    count, replicas = len(metadata.partitions), len(metadata.partitions[0].replicas)
    resource = ConfigResource(ResourceType.TOPIC, source)
    entries = admin.describe_configs([resource])[resource].result(CALL_TIMEOUT_S)
    config = {
        name: entries[name].value
        for name in ("retention.ms", "retention.bytes")
        if name in entries and entries[name].value is not None
    }
    future = admin.create_topics([NewTopic(sink, count, replicas, config=config)])[sink]
    try:
        future.result(CALL_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def committed_offsets(
    bootstrap_servers: str,
    group_id: str,
    topic: str,
    partitions: Sequence[int] | None = None,
    *,
    wait_stable: bool = True,
) -> dict[int, int]:
    """The group's committed offset per partition of ``topic`` (-1: none).

    Args:
        wait_stable: wait until no open transaction holds offsets of the group (a
            read_committed consumer's OffsetFetch, KIP-447 ``require_stable``); False:
            the offsets committed so far at once, even while one does (a killed job's
            open transaction holds them until it is aborted).
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group_id,
            "isolation.level": "read_committed" if wait_stable else "read_uncommitted",
            "log_level": 4,
            **client_security.librdkafka(),
        }
    )
    try:
        owned = sorted(partitions) if partitions else _partitions(consumer, topic)
        got = consumer.committed([TopicPartition(topic, p) for p in owned], CALL_TIMEOUT_S)
        return {tp.partition: max(tp.offset, -1) for tp in got}
    finally:
        consumer.close()


# -- into Delta ------------------------------------------------------------------------------


class CommittedTopicSource(TopicSource):
    """A ``TopicSource`` read with ``kafka.isolation.level=read_committed``: aborted
    records are dropped and the latest offset is the last stable offset."""

    def options(self) -> dict[str, str]:
        return {**super().options(), "kafka.isolation.level": "read_committed"}


def to_delta(
    spark: Any,
    *,
    bootstrap_servers: str,
    sink_topic: str,
    table_path: str,
    remote_url: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    max_offsets: int | None = None,
) -> IngestResult:
    """Stage 2: the sink topic's committed records the table does not hold yet, appended
    exactly once (``pipelines.ingest``'s plan and write, read_committed).

    Raises:
        SourceError: the sink topic does not exist, or offsets to read were deleted.
    """
    source = CommittedTopicSource(
        sink_topic,
        bootstrap_servers=bootstrap_servers,
        remote_url=remote_url,
        storage_options=storage_options or {},
    )
    path = table_location(table_path)
    plan = plan_ingest(spark, source, path, max_offsets=max_offsets)
    if plan.offsets_to_read and not _holds_records(bootstrap_servers, plan):
        # The table's offsets end one short of each partition's last stable offset: the
        # COMMIT marker after its last record, which read_committed never returns. Without
        # this, every re-run would commit an empty append for it.
        plan = dataclasses.replace(plan, start=dict(plan.end))
    return write_ingest(spark, source, plan, path)


def _holds_records(bootstrap_servers: str, plan: IngestPlan) -> bool:
    """Whether the plan's ranges hold a record a read_committed reader gets. A consumer
    answers with the first one, so a long range costs one fetch (Spark would plan and
    start a job); a range at the end of its partition answers with end-of-partition.

    Raises:
        KafkaException: the range's offsets were deleted (the write would say so too).
        TimeoutError: no answer in ``CALL_TIMEOUT_S``.
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    pending = {p for p, end in plan.end.items() if end > plan.start[p]}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "tierlog-exactly-once-probe",  # never commits
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "log_level": 4,
            **client_security.librdkafka(),
        }
    )
    try:
        consumer.assign([TopicPartition(plan.topic, p, plan.start[p]) for p in pending])
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer from {plan.topic} in {CALL_TIMEOUT_S} s")
            for msg in consumer.consume(100, 0.5):
                error, partition, offset = msg.error(), msg.partition(), msg.offset()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                assert partition is not None and offset is not None
                if error is None and offset < plan.end[partition]:
                    return True
                pending.discard(partition)  # at the end, or past the range
        return False
    finally:
        consumer.close()


# -- the CLI ---------------------------------------------------------------------------------


def _partition_list(value: list[Any]) -> list[int]:
    if not value or not all(isinstance(p, int) and not isinstance(p, bool) for p in value):
        raise ValueError(f"{value!r} is not a non-empty list of partition numbers")
    if min(value) < 0:
        raise ValueError(f"{min(value)} is below 0")
    return sorted(set(value))


def _not_negative(value: int) -> int:
    if value < 0:
        raise ValueError(f"{value} is below 0")
    return value


TRANSFORM_KEYS = (
    "bootstrap_servers",
    "source_topic",
    "sink_topic",
    "group_id",
    "partitions",
    "transaction_records",
    "transaction_ms",
    "commit_delay_ms",
)
TO_DELTA_KEYS = (
    "bootstrap_servers",
    "sink_topic",
    "table_path",
    "remote_url",
    "storage_options",
    "max_offsets",
)
KEYS = (
    Key("bootstrap_servers", (str,), parse=non_empty),
    Key("source_topic", (str,), None, parse=non_empty),
    Key("sink_topic", (str,), parse=non_empty),
    Key("group_id", (str,), DEFAULT_GROUP, parse=non_empty),
    Key("partitions", (list,), None, parse=_partition_list),
    Key("transaction_records", (int,), 500, parse=positive),
    Key("transaction_ms", (int,), 1000, parse=positive),
    Key("commit_delay_ms", (int,), 0, parse=_not_negative),
    Key("table_path", (str,), None, parse=non_empty),
    Key("remote_url", (str,), None, parse=non_empty),  # the sink's remote tier
    Key("storage_options", (dict,), None),
    Key("max_offsets", (int,), None, parse=positive),
)
STAGES = ("transform", "to_delta")


def _run_transform(config: Mapping[str, Any]) -> TransformResult:
    from tierlog.util.configdef import ConfigError

    if config["source_topic"] is None:
        raise ConfigError("source_topic", "required by the transform stage")
    stage = {k: config[k] for k in TRANSFORM_KEYS}
    return transform(**stage, progress=lambda line: print(line, file=sys.stderr, flush=True))


def _run_to_delta(spark: Any, config: Mapping[str, Any]) -> IngestResult:
    from tierlog.util.configdef import ConfigError

    if config["table_path"] is None:
        raise ConfigError("table_path", "required by the to_delta stage")
    return to_delta(spark, **{k: config[k] for k in TO_DELTA_KEYS})


def _both(spark: Any, **config: Any) -> dict[str, Any]:
    if config["table_path"] is None:  # before minutes of transform
        from tierlog.util.configdef import ConfigError

        raise ConfigError("table_path", "required by the to_delta stage")
    first = _run_transform(config)
    return {"transform": as_json(first), "to_delta": as_json(_run_to_delta(spark, config))}


def cli(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.exactly_once [transform|to_delta] [--config FILE] [--set ...]``:
    one stage, or both in order; the result as one JSON line."""
    args = list(sys.argv[1:] if argv is None else argv)
    stage = args.pop(0) if args and args[0] in STAGES else None
    description = "exactly-once topic -> transform -> topic, then -> Delta table"
    if stage == "to_delta":
        return main(
            "exactly_once", KEYS, lambda spark, **c: _run_to_delta(spark, c), args,
            description=description,
        )  # fmt: skip
    if stage is None:
        return main("exactly_once", KEYS, _both, args, description=description)
    return _transform_cli(args, description)


def _transform_cli(args: Sequence[str], description: str) -> int:
    """The transform stage alone: no Spark (``common.main`` starts it for every run)."""
    from tierlog.util.cli_errors import require_listening, run_cli
    from tierlog.util.configdef import ConfigError

    prog = "python -m pipelines.exactly_once transform"
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", type=Path, help="a TOML file of the keys below")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("-v", "--verbose", action="store_true", help="a traceback with any error")
    parsed = parser.parse_args(args)
    try:
        config = load_config(KEYS, parsed.config, parsed.set)
        config.pop("spark")
        if config["source_topic"] is None:
            raise ConfigError("source_topic", "required by the transform stage")

        def run() -> int:
            require_listening(config["bootstrap_servers"], option="--set bootstrap_servers=H:P")
            print(json.dumps(as_json(_run_transform(config)), sort_keys=True))
            return 0

        return run_cli(run, prog, verbose=parsed.verbose)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(cli())
