"""The ``tierlog`` source in Spark local mode against a real broker whose topic is partly
offloaded to a file:// remote tier: rows equal the topic's across the tier boundary, for
batch, remote-only and streaming reads, with batches of every codec."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

from tests.spark.streams import run_available_now
from tests.tiered_data import Row, TieredTopic, produce_activity, running_tiered_topic, topic_rows
from tierlog.client import LATEST, LogClient
from tierlog.spark.datasource import SplitPartition, TierlogBatchReader, TierlogPushdownReader
from tierlog.spark.options import parse
from tierlog.spark.session import PUSHDOWN_CONF


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredTopic]:
    with running_tiered_topic(tmp_path_factory.mktemp("source") / "data", count=3000) as topic:
        yield topic


def spark_rows(df: Any) -> list[Row]:
    out = df.selectExpr(
        "partition", "offset", "key", "value", "cast(unix_micros(timestamp) / 1000 as long) as ts"
    ).collect()
    return sorted((r[0], r[1], r[2], bytes(r[3]), r[4]) for r in out)


def source_options(tiered: TieredTopic, **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": tiered.bootstrap,
        "subscribe": tiered.topic,
        "remote.log.storage.url": tiered.remote_url,
        **extra,
    }


def read(spark: Any, options: dict[str, str]) -> Any:
    return spark.read.format("tierlog").options(**options).load()


def test_rows_equal_the_topic_across_the_tier_boundary(spark: Any, tiered: TieredTopic) -> None:
    expected = topic_rows(tiered)
    assert len(expected) == tiered.produced
    df = read(spark, source_options(tiered, **{"tierlog.includeTier": "true"}))
    assert spark_rows(df) == expected
    by_tier = {r["tier"]: r["count"] for r in df.groupBy("tier").count().collect()}
    remote_rows = sum(tiered.remote_ends().values())  # no compaction: one row per offset
    assert by_tier == {"remote": remote_rows, "local": tiered.produced - remote_rows}
    assert by_tier["local"] > 0 and by_tier["remote"] > 0


def test_schema_is_the_kafka_sources(spark: Any, tiered: TieredTopic) -> None:
    df = read(spark, source_options(tiered, includeHeaders="true"))
    assert df.columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
    ]  # fmt: skip
    assert df.where("headers is not null").count() == 0  # the producer sent none
    without = read(spark, source_options(tiered))  # Spark's default: includeHeaders=false
    assert "headers" not in without.columns
    producer = Producer({"bootstrap.servers": tiered.bootstrap})
    producer.produce("with-headers", b"v", b"k", headers=[("trace", b"42"), ("empty", None)])
    assert producer.flush(10) == 0
    with_headers = read(
        spark,
        {"kafka.bootstrap.servers": tiered.bootstrap, "subscribe": "with-headers",
         "includeHeaders": "true"},
    ).collect()  # fmt: skip
    assert [(h["key"], h["value"]) for h in with_headers[0]["headers"]] == [
        ("trace", b"42"),
        ("empty", None),
    ]
    first = df.where("partition = 0 and offset = 0").collect()[0]
    event = json.loads(first["value"])
    assert first["key"] == event["user"].encode() and first["timestampType"] == 0


def test_remote_only_reads_without_a_broker_path(spark: Any, tiered: TieredTopic) -> None:
    ends = tiered.remote_ends()
    df = read(
        spark,
        {
            "subscribe": tiered.topic,
            "remote.log.storage.url": tiered.remote_url,
            "tierlog.tiers": "remote",
        },
    )
    expected = [r for r in topic_rows(tiered) if r[1] < ends[r[0]]]
    assert spark_rows(df) == expected


def test_offset_and_timestamp_bounds(spark: Any, tiered: TieredTopic) -> None:
    expected = topic_rows(tiered)
    bounds = {"startingOffsets": json.dumps({tiered.topic: {"0": 10, "1": -2}}),
              "endingOffsets": json.dumps({tiered.topic: {"0": 500}})}  # fmt: skip
    df = read(spark, source_options(tiered, **bounds))
    assert spark_rows(df) == [r for r in expected if (r[0] == 0 and 10 <= r[1] < 500) or r[0] == 1]
    middle = sorted(r[4] for r in expected)[len(expected) // 2]
    by_time = read(spark, source_options(tiered, startingTimestamp=str(middle)))
    first_at = {p: min((r[1] for r in expected if r[0] == p and r[4] >= middle), default=None)
                for p in (0, 1)}  # fmt: skip
    assert spark_rows(by_time) == [
        r for r in expected if first_at[r[0]] is not None and r[1] >= first_at[r[0]]
    ]


def test_filters_prune_the_plan_and_every_row_still_matches(
    spark: Any, tiered: TieredTopic
) -> None:
    assert spark.conf.get(PUSHDOWN_CONF) == "true"  # session() turns pushdown on
    expected = topic_rows(tiered)
    by_offset = read(spark, source_options(tiered)).where(
        "partition = 1 and offset >= 100 and offset < 900"
    )
    assert spark_rows(by_offset) == [r for r in expected if r[0] == 1 and 100 <= r[1] < 900]
    recent = sorted(r[4] for r in expected)[len(expected) * 9 // 10]  # the newest tenth
    by_time = read(spark, source_options(tiered)).where(f"timestamp >= timestamp_millis({recent})")
    assert spark_rows(by_time) == [r for r in expected if r[4] >= recent]

    # What the reader plans with those filters: only ranges that can match.
    options = parse(source_options(tiered))
    whole = [p.split for p in TierlogPushdownReader(options).partitions()]
    offsets = [
        EqualTo(("partition",), 1),
        GreaterThanOrEqual(("offset",), 100),
        LessThan(("offset",), 900),
    ]
    reader = TierlogPushdownReader(options)
    assert reader.pushFilters(offsets) is offsets  # all given back: Spark checks each row
    pruned = [p.split for p in reader.partitions()]
    assert pruned and all(s.partition == 1 and 100 <= s.start < s.end <= 900 for s in pruned)
    end = min(900, max(s.end for s in whole if s.partition == 1))
    assert sum(s.end - s.start for s in pruned) == end - 100
    assert end - 100 < sum(s.end - s.start for s in whole)
    stamp = dt.datetime.fromtimestamp(recent / 1000, dt.UTC)
    reader = TierlogPushdownReader(options)
    reader.pushFilters([GreaterThanOrEqual(("timestamp",), stamp)])
    first_at = {p: min(r[1] for r in expected if r[0] == p and r[4] >= recent) for p in (0, 1)}
    recent_splits = [p.split for p in reader.partitions()]
    assert all(s.start >= first_at[s.partition] for s in recent_splits)
    assert {s.partition: s.start for s in recent_splits if s.start == first_at[s.partition]}
    assert len(recent_splits) < len(whole)


def test_a_new_query_reads_what_was_produced_since(spark: Any, tiered: TieredTopic) -> None:
    """A query plans its read when it runs: a DataFrame loaded again, or a new query on the
    same one, sees the records produced since. (Spark keeps a Python data source's plan
    for a query it has run, so the very same query run again answers as before: the
    README says to load again.)"""
    topic = f"again-{time.time_ns()}"
    producer = Producer({"bootstrap.servers": tiered.bootstrap})

    def produce(count: int) -> None:
        for n in range(count):
            producer.produce(topic, f"v{n}".encode())
        assert producer.flush(10) == 0

    produce(100)  # auto-created
    options = {"kafka.bootstrap.servers": tiered.bootstrap, "subscribe": topic}
    df = read(spark, options)
    assert df.count() == 100
    produce(50)
    assert read(spark, options).count() == 150
    assert df.where("offset >= 0").count() == 150
    assert df.select("value").count() == 150


def test_unknown_topic_is_a_clear_error(spark: Any, tiered: TieredTopic) -> None:
    with pytest.raises(Exception, match="no-such-topic"):
        read(spark, {**source_options(tiered), "subscribe": "no-such-topic"}).collect()


def test_streaming_available_now_then_only_new_rows(
    spark: Any, tiered: TieredTopic, tmp_path: Path
) -> None:
    stream = spark.readStream.format("tierlog").options(
        **source_options(tiered, startingOffsets="earliest")
    )
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> list[Row]:
        return spark_rows(run_available_now(spark, stream, out, checkpoint))

    assert run() == topic_rows(tiered)
    produce_activity(tiered.bootstrap, tiered.topic, 300, first=tiered.produced, codecs=("lz4",))
    tiered.produced += 300
    assert run() == topic_rows(tiered)  # the new rows once, the old ones not again


def test_max_offsets_per_trigger_bounds_each_micro_batch(spark: Any, tiered: TieredTopic) -> None:
    query = (
        spark.readStream.format("tierlog")
        .options(**source_options(tiered, startingOffsets="earliest", maxOffsetsPerTrigger="1000"))
        .load()
        .writeStream.format("memory")
        .queryName("bounded")
        .start()
    )
    try:
        query.processAllAvailable()
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert sum(sizes) == len(topic_rows(tiered))
    assert len(sizes) >= 3 and max(sizes) <= 1000 + 2  # at least one offset per partition


def local_log_start(tiered: TieredTopic, partition: int) -> int:
    segments = (tiered.broker.data_dir / f"{tiered.topic}-{partition}").glob("*.log")
    return min(int(f.stem) for f in segments)


def test_available_now_reads_to_the_start_time_end_in_bounded_batches(
    spark: Any, tiered: TieredTopic, tmp_path: Path
) -> None:
    expected = topic_rows(tiered)
    query = (
        spark.readStream.format("tierlog")
        .options(**source_options(tiered, startingOffsets="earliest", maxOffsetsPerTrigger="1500"))
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(90)
    assert query.exception() is None
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == len(expected) and len(sizes) >= 2 and max(sizes) <= 1500 + 2
    assert spark_rows(spark.read.parquet(str(tmp_path / "out"))) == expected


def test_no_offset_twice_or_skipped_while_offload_runs_during_the_query(
    tiered: TieredTopic,
) -> None:
    """Plan, then let the broker offload and delete the planned hot range locally, then
    read: the leader serves the moved offsets from the remote tier; nothing doubles."""
    with LogClient(tiered.bootstrap) as client:
        latest = client.list_offsets({(tiered.topic, p): LATEST for p in (0, 1)})
    reader = TierlogBatchReader(parse(source_options(tiered)))
    planned = [p.split for p in reader.partitions()]
    ends_at_plan = tiered.remote_ends()
    # Uncompressed, so the new data pushes the planned hot range out of local retention.
    produce_activity(tiered.bootstrap, tiered.topic, 3000, first=tiered.produced, codecs=("none",))
    tiered.produced += 3000
    deadline = time.monotonic() + 60
    while any(local_log_start(tiered, p) <= ends_at_plan[p] for p in (0, 1)):
        assert time.monotonic() < deadline, "the planned hot range was never deleted locally"
        time.sleep(0.2)
    for p in (0, 1):
        assert (
            min(s.start for s in planned if s.partition == p and s.tier == "local")
            == ends_at_plan[p]
        )
    got: dict[int, list[int]] = {0: [], 1: []}
    for split in planned:
        for batch in reader.read(SplitPartition(split)):
            partitions, offsets = batch.column("partition"), batch.column("offset")
            for p, o in zip(partitions.to_pylist(), offsets.to_pylist(), strict=True):
                got[p].append(o)
    for p in (0, 1):
        assert sorted(got[p]) == list(range(latest[tiered.topic, p]))
