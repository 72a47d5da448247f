"""The Spark half of bench/spark_read.py: the ``tierlog`` data source vs Spark's own Kafka
source (spark-sql-kafka-0-10, from Maven Central) reading the same, mostly cold topic.

One tierlog broker (file:// remote tier, small local retention) holds a topic of 200-byte
records, most of it only in the remote tier; an Apache Kafka broker (``bench/kafka_ref.py``,
KRaft, the jars of ``bench/throughput.py``) holds the same records in a topic of the same
partitions and segment size. One Spark session (local[2]) reads three ways: the ``tierlog``
source (cold part straight from the object store, hot part from the tierlog broker),
Spark's Kafka source through the tierlog broker (which serves the cold part from its remote
tier), and Spark's Kafka source from the Kafka broker: what a user of Kafka gets today. The
session's start-up and a warm-up read of each way are excluded, and the three must agree on
the count and the byte sum. Each timed pass runs the same query, ``count(*),
sum(length(value))``, so every way reads every record; passes rotate the order of the ways,
and each pass loads its DataFrame afresh (Spark keeps a Python data source's plan for a
query it has run: the same DataFrame again would skip the tierlog source's planning). The
same with a filter on the newest tenth of the records by timestamp, which the tierlog
source pushes down (each partition starts at its first offset that recent).
The median of each way's passes is reported with their spread (the best beside it, as
before); the ratios are the other way's time over tierlog's. When Kafka cannot be fetched
or started, the run says why and compares the other two.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kafka_ref
from procs import BrokerNotReady, ManagedProcess, wait_ready
from tierlog_ref import start_tierlog

from tierlog.remote.manifest import end_offset
from tierlog.remote.registry import open_store

TOPIC = "cold"
PARTITIONS = 4
WORK = Path(__file__).resolve().parent / ".work"  # git-ignored, Kafka's jars shared


def _fill(bootstrap: str, records: int, segment_bytes: int, local_bytes: int | None) -> None:
    """``records`` of ~200 bytes into ``TOPIC``, tiered with ``local_bytes`` of local
    retention (tierlog), or untiered when it is None (Kafka: no remote storage plugin)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    # log_level 4 (warnings and up): no librdkafka info lines (BGQUEUE ... Purging at close).
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    config = {"segment.bytes": str(segment_bytes), "retention.ms": "-1"}
    if local_bytes is not None:
        config.update({"remote.storage.enable": "true", "local.retention.bytes": str(local_bytes)})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=config)])[TOPIC].result(10)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
         "compression.type": "lz4", "queue.buffering.max.kbytes": 1 << 20, "log_level": 4}
    )  # fmt: skip
    started = int(time.time() * 1000) - records
    for n in range(records):
        # ~200 bytes: a JSON-ish activity event whose content varies like real logs do.
        value = (
            b'{"user":"user-%05d","event":"page_view","page":"/product/%d","ts":%d,'
            b'"session":"%016x","agent":"Mozilla/5.0 (X11; Linux x86_64)","ref":"/search?q=%d"}'
        ) % (n % 9973, n % 500, started + n, (n * 2654435761) & 0xFFFFFFFFFFFF, n % 1000)
        while True:
            try:
                producer.produce(TOPIC, value, b"user-%05d" % (n % 9973), timestamp=started + n)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def _remote_share(data: Path, latest: dict[int, int]) -> float:
    ends = 0
    for p in range(PARTITIONS):
        manifest = open_store((data / "remote").as_uri()).read_manifest(TOPIC, p)
        ends += max(end_offset(manifest), 0)
    return ends / max(1, sum(latest.values()))


def _start_kafka(version: str, run_dir: Path) -> tuple[ManagedProcess | None, str, str]:
    """Apache Kafka for the third way: (process, bootstrap, version), or (None, "", why)."""
    try:
        dist = kafka_ref.fetch_kafka(WORK, version)
        proc, bootstrap = kafka_ref.start_kafka(dist, run_dir)
    except kafka_ref.KafkaUnavailable as exc:
        return None, "", f"unavailable: {exc}"
    try:
        wait_ready(proc, bootstrap, 120)
    except BrokerNotReady as exc:
        proc.stop()
        return None, "", f"did not start: {exc}"
    return proc, bootstrap, dist.version


def bench_spark(args: Any) -> dict[str, Any]:
    from tierlog.client import LATEST, LogClient
    from tierlog.spark import session

    quick = bool(args.quick)
    records = args.spark_records or (200_000 if quick else 2_000_000)
    run_dir = WORK / "spark_read"
    shutil.rmtree(run_dir, ignore_errors=True)
    proc, bootstrap, data = start_tierlog(run_dir)
    kafka: ManagedProcess | None = None
    try:
        wait_ready(proc, bootstrap, 60)
        segment = (1 << 20) if quick else (8 << 20)
        _fill(bootstrap, records, segment, 2 * segment)
        with LogClient(bootstrap) as client:
            latest = {
                p: o
                for (_, p), o in client.list_offsets(
                    {(TOPIC, p): LATEST for p in range(PARTITIONS)}
                ).items()
            }
        # Until offload has settled: every closed segment uploaded (the share stops
        # growing; local retention keeps about two segments per partition local).
        deadline = time.monotonic() + 300
        share, steady_since = -1.0, time.monotonic()
        while time.monotonic() < deadline:
            now = _remote_share(data, latest)
            if now != share:
                share, steady_since = now, time.monotonic()
            elif share > 0.5 and time.monotonic() - steady_since > 3:
                break
            time.sleep(0.5)
        print(f"spark: {records:,} records, {share:.0%} of them only remote", flush=True)
        kafka, kafka_bootstrap, kafka_version = _start_kafka(
            getattr(args, "kafka_version", "auto"), run_dir / "kafka"
        )
        if kafka is not None:
            _fill(kafka_bootstrap, records, segment, None)
            print(f"spark: Apache Kafka {kafka_version} holds the same records", flush=True)
        else:
            print(f"spark: Apache Kafka {kafka_version}; comparing two ways", flush=True)
        spark = session("spark-read-bench", master="local[2]", delta=False, kafka_source=True)
        remote = (data / "remote").resolve().as_uri()
        # Each way is a query made afresh for every pass (a new load, then the filter):
        # Spark keeps a Python data source's plan for a query it has already run, so the
        # same DataFrame run again would skip the tierlog source's planning (its
        # ListOffsets and manifest reads) while Spark's Kafka source plans every time.
        ways: dict[str, Callable[[], Any]] = {
            "tierlog": lambda: tierlog_source(spark, bootstrap, remote),
            "kafka": lambda: kafka_source(spark, bootstrap),
        }
        if kafka is not None:
            ways["kafka_on_kafka"] = lambda: kafka_source(spark, kafka_bootstrap)
        query = ("count(*) as n", "sum(length(value)) as bytes")
        answers: dict[str, tuple[int, int]] = {}
        times: dict[str, list[float]] = {name: [] for name in ways}
        for name, make in ways.items():  # warm-up
            row = make().selectExpr(*query).collect()[0]
            answers[name] = (int(row["n"]), int(row["bytes"]))
        if len(set(answers.values())) != 1 or answers["kafka"][0] != records:
            raise SystemExit(f"the sources disagree: {answers} for {records} records")

        # The newest tenth by timestamp: the tierlog source starts each partition at its
        # first offset that recent (filter pushdown); Spark's Kafka source reads all and
        # filters. The bound is each broker's own (Kafka's copy was produced later); the
        # ways reading one broker must count the same rows.
        def tenth(df: Any) -> int:
            return int(
                df.selectExpr("percentile_approx(unix_millis(timestamp), 0.9) as t").collect()[0][
                    "t"
                ]
            )

        newest = {"tierlog": tenth(ways["tierlog"]())}
        newest["kafka"] = newest["tierlog"]  # the same broker's records
        if "kafka_on_kafka" in ways:
            newest["kafka_on_kafka"] = tenth(ways["kafka_on_kafka"]())
        recent = {
            f"{name} newest 10%": recent_of(make, newest[name]) for name, make in ways.items()
        }
        for name, make in recent.items():  # warm-up
            row = make().selectExpr(*query).collect()[0]
            answers[name] = (int(row["n"]), int(row["bytes"]))
        same = answers["tierlog newest 10%"] == answers["kafka newest 10%"]
        if not same or not 0 < answers["kafka newest 10%"][0] < records:
            raise SystemExit(f"the filtered reads disagree: {answers}")
        ways.update(recent)
        times.update({name: [] for name in recent})
        order = list(ways)
        for _ in range(args.spark_repeats or 3):
            order = order[1:] + order[:1]  # who goes first rotates
            for name in order:
                t0 = time.perf_counter()
                ways[name]().selectExpr(*query).collect()
                times[name].append(time.perf_counter() - t0)
        spark.stop()
    finally:
        proc.stop()
        if kafka is not None:
            kafka.stop()
    best = {k: min(v) for k, v in times.items()}
    median = {k: statistics.median(v) for k, v in times.items()}
    out = {
        "records": records,
        "record_bytes": 200,
        "partitions": PARTITIONS,
        "remote_share": round(share, 3),
        "kafka_broker": kafka_version,
        "tierlog_s": round(best["tierlog"], 3),
        "kafka_source_s": round(best["kafka"], 3),
        "tierlog_records_per_s": round(records / best["tierlog"]),
        "kafka_source_records_per_s": round(records / best["kafka"]),
        "ratio_tierlog_vs_kafka_source": round(best["kafka"] / best["tierlog"], 2),
        "ratio_tierlog_vs_kafka_source_median": round(median["kafka"] / median["tierlog"], 2),
        "all_s": times,
        "rounds_records_per_s": {k: [records / t for t in v] for k, v in times.items()},
    }
    newest_rows = answers["tierlog newest 10%"][0]
    out["newest_10pct"] = {
        "records": newest_rows,
        "share": round(newest_rows / records, 3),
        "tierlog_s": round(median["tierlog newest 10%"], 3),
        "kafka_source_s": round(median["kafka newest 10%"], 3),
        "ratio_tierlog_vs_kafka_source_median": round(
            median["kafka newest 10%"] / median["tierlog newest 10%"], 2
        ),
    }
    if "kafka_on_kafka" in times:
        out["kafka_source_on_kafka_s"] = round(best["kafka_on_kafka"], 3)
        out["ratio_tierlog_vs_kafka_source_on_kafka_median"] = round(
            median["kafka_on_kafka"] / median["tierlog"], 2
        )
    return out


def recent_of(make: Callable[[], Any], since_ms: int) -> Callable[[], Any]:
    """A way's query of the records from ``since_ms`` on."""
    return lambda: make().where(f"timestamp >= timestamp_millis({since_ms})")


def tierlog_source(spark: Any, bootstrap: str, remote: str) -> Any:
    """The tierlog source on ``TOPIC``: the cold part from ``remote``, the rest from the
    broker at ``bootstrap``."""
    return (
        spark.read.format("tierlog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("remote.log.storage.url", remote)
        .load()
    )


def kafka_source(spark: Any, bootstrap: str) -> Any:
    """Spark's own Kafka source on ``TOPIC`` of the broker at ``bootstrap``."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .load()
    )
