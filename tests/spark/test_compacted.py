"""The ``tierlog`` source on a compacted topic a real broker has cleaned: offset gaps and
empty batches are not data loss (failOnDataLoss=true, the default), as in Spark's Kafka
source. Batch and streaming (maxOffsetsPerTrigger) rows are exactly the cleaned log's
records: every key's latest value at its original offset, tombstones as null values. A
tiered compacted topic, cleaned in object storage, reads the same whether executors read
its remote segments straight from the store or the leader serves them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tierlog.tools.dump_log import scan_log

TOPIC = "users"
KEYS = 100
DELETED = 10  # user-0 .. user-9 end as tombstones
FILLER = 600  # unique keys after the overwrites, so the overwrites land in closed segments
Record = tuple[int, bytes, bytes | None]  # offset, key, value


def _produce(
    bootstrap: str, records: list[tuple[bytes, bytes | None]], topic: str = TOPIC
) -> dict[bytes, Record]:
    """Through an idempotent producer of its own; returns each key's last record."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
         "batch.size": 4096}
    )  # fmt: skip
    last: dict[bytes, Record] = {}

    def delivered(err: object, msg: Any) -> None:
        assert err is None, err
        last[msg.key()] = (msg.offset(), msg.key(), msg.value())

    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    return last


def _log_records(bootstrap: str, topic: str = TOPIC) -> list[Record]:
    """The whole log as a confluent-kafka consumer reads it (the reference)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"ref-{time.monotonic_ns()}",
         "enable.auto.commit": False}
    )  # fmt: skip
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[Record] = []
        deadline = time.monotonic() + 60
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            for m in consumer.consume(500, timeout=1):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        consumer.close()


def _empty_batches(partition_dir: Path) -> int:
    count = 0
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        for _, header, problem in scan_log(memoryview(data), verify_crc=False):
            if header is not None and problem is None and header.record_count == 0:
                count += 1
    return count


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Record]]]:
    """A broker whose topic ``users`` was cleaned: (bootstrap, the cleaned log's records).

    Producer A writes every key many times; producer B rewrites every key once and deletes
    ten, so all of A's records are superseded and its last batch stays, EMPTY, for its
    sequence numbers; filler records close the segments B wrote to, so they are cleaned.
    """
    data = tmp_path_factory.mktemp("compacted") / "data"
    broker = BrokerProcess(data, {"log.cleaner.backoff.ms": "100"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept until done
        configs = {"cleanup.policy": "compact", "segment.bytes": "16384",
                   "min.cleanable.dirty.ratio": "0.01"}  # fmt: skip
        admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(timeout=20)
        last = _produce(
            broker.bootstrap,
            [(b"user-%d" % (i % KEYS), b"v%d@example.com" % i) for i in range(3000)],
        )
        last |= _produce(
            broker.bootstrap,
            [(b"user-%d" % k, None if k < DELETED else b"final-%d" % k) for k in range(KEYS)]
            + [(b"filler-%d" % i, b"x" * 20) for i in range(FILLER)],
        )
        deadline = time.monotonic() + 90
        while True:
            records = _log_records(broker.bootstrap)
            users = [key for _, key, _ in records if key.startswith(b"user-")]
            done = len(users) == KEYS and _empty_batches(data / f"{TOPIC}-0") > 0
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert done, f"not cleaned in time: {len(users)} user records, broker log {broker.log_path}"
        latest = {key: (offset, key, value) for offset, key, value in records}
        assert latest == last, "the cleaned log holds each key's last record, tombstones too"
        assert sum(value is None for _, _, value in records) == DELETED
        yield broker.bootstrap, records
    finally:
        broker.stop()


def _rows(df: Any) -> list[Record]:
    return sorted((r["offset"], bytes(r["key"]), r["value"] and bytes(r["value"]))
                  for r in df.select("offset", "key", "value").collect())  # fmt: skip


def _options(bootstrap: str, **extra: str) -> dict[str, str]:
    # Small leader splits, so that many of them begin or lie wholly in a gap.
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC,
            "tierlog.leaderSplitOffsets": "400", **extra}  # fmt: skip


def test_batch_read_of_a_cleaned_topic_is_its_records(
    spark: Any, cleaned: tuple[str, list[Record]]
) -> None:
    bootstrap, records = cleaned
    df = spark.read.format("tierlog").options(**_options(bootstrap)).load()
    assert _rows(df) == records  # failOnDataLoss defaults to true: gaps raised nothing
    assert records[0][0] == 3000, "producer A's 3000 records were all cleaned away"


def test_streaming_bounded_micro_batches_read_the_cleaned_topic(
    spark: Any, cleaned: tuple[str, list[Record]], tmp_path: Path
) -> None:
    bootstrap, records = cleaned
    query = (
        spark.readStream.format("tierlog")
        .options(**_options(bootstrap, startingOffsets="earliest", maxOffsetsPerTrigger="500",
                            failOnDataLoss="true"))
        .load()
        .writeStream.format("memory")
        .queryName("compacted")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )  # fmt: skip
    try:
        query.processAllAvailable()
        assert query.exception() is None
        progress = [p for p in query.recentProgress if p["sources"][0]["endOffset"]]
    finally:
        query.stop()
    assert _rows(spark.table("compacted")) == records
    # Micro-batches are bounded in offsets, not rows: gaps make them hold fewer rows, and
    # some none at all (offsets wholly cleaned away, or only the empty batch).
    assert len(progress) >= (records[-1][0] + 1) // 500
    assert max(p["numInputRows"] for p in progress) <= 500
    assert min(p["numInputRows"] for p in progress) == 0


TIERED = "profiles"


@pytest.mark.timeout(300)
def test_a_tiered_compacted_topic_cleaned_in_object_storage(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(
        data,
        {"remote.log.manager.task.interval.ms": "200", "log.retention.check.interval.ms": "200",
         "log.cleaner.backoff.ms": "100"},
    ).start()  # fmt: skip
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = {"cleanup.policy": "compact", "remote.storage.enable": "true",
                   "local.retention.bytes": "30000", "segment.bytes": "16384",
                   "min.cleanable.dirty.ratio": "0.01"}  # fmt: skip
        admin.create_topics([NewTopic(TIERED, 1, 1, config=configs)])[TIERED].result(timeout=20)
        produced = [
            (b"user-%d" % (i % KEYS), None if i % 97 == 0 else b"v%d" % i) for i in range(4000)
        ]
        last = _produce(broker.bootstrap, produced, topic=TIERED)
        # One producer, one partition: record i is at offset i.
        written = {offset: (offset, key, value) for offset, (key, value) in enumerate(produced)}
        # Cleaned remotely, part of the log only in the store, and no pass under way: two
        # reads a second apart agree.
        deadline = time.monotonic() + 120
        records: list[Record] = []
        while True:
            assert time.monotonic() < deadline, broker.log_text()[-3000:]
            local_start = min(int(p.stem) for p in (data / f"{TIERED}-0").glob("*.log"))
            if "remote segments cleaned" in broker.log_text() and local_start > 0:
                again = _log_records(broker.bootstrap, TIERED)
                if again == records:
                    break
                records = again
            time.sleep(1)
        assert len(records) < 2000, "the remote part was cleaned"

        def check(rows: list[Record]) -> None:
            """A compacted log's contract: offsets rise, every row is a record written at
            that offset, every key's last record is there (tombstones too)."""
            offsets = [offset for offset, _, _ in rows]
            assert offsets == sorted(set(offsets))
            assert [written[offset] for offset in offsets] == rows
            assert {key: (o, key, v) for o, key, v in rows} == last

        check(records)
        options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": TIERED,
                   "tierlog.leaderSplitOffsets": "400"}  # fmt: skip
        from_store = spark.read.format("tierlog").options(
            **options, **{"remote.log.storage.url": (data / "remote").as_uri(),
                          "tierlog.includeTier": "true"}
        ).load()  # fmt: skip
        check(_rows(from_store))
        remote_keys = [r["key"] for r in from_store.where("tier = 'remote'").collect()]
        assert remote_keys and len(remote_keys) == len(set(remote_keys)), "cleaned: one per key"
        assert from_store.where("tier = 'local'").count() > 0
        # Without the store's URL the leader serves the remote part itself. Offsets both in
        # the store (cleaned) and still on local disk (the local part of a tiered log is
        # not cleaned) may come from either tier, depending on where a fetch starts, for
        # Spark as for any consumer: the contract holds, not row-for-row equality.
        check(_rows(spark.read.format("tierlog").options(**options).load()))
    finally:
        broker.stop()
