"""The Spark half of bench/spark_read.py: the ``tierlog`` data source vs Spark's own Kafka
source (spark-sql-kafka-0-10, from Maven Central) reading the same, mostly cold topic.

One tierlog broker (file:// remote tier, small local retention) holds a topic of 200-byte
records, most of it only in the remote tier. One Spark session (local[2]) has both sources;
its start-up and a warm-up read of each are excluded. Each timed pass runs the same query,
``count(*), sum(length(value))``, so both read every record; passes alternate between the
two sources and the best of each is kept. The ratio is Kafka source time / tierlog time.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from procs import wait_ready
from tierlog_ref import start_tierlog

TOPIC = "cold"
PARTITIONS = 4


def _fill(bootstrap: str, records: int, segment_bytes: int, local_bytes: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    # log_level 4 (warnings and up): no librdkafka info lines (BGQUEUE ... Purging at close).
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    config = {
        "remote.storage.enable": "true",
        "segment.bytes": str(segment_bytes),
        "local.retention.bytes": str(local_bytes),
        "retention.ms": "-1",
    }
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
        path = data / "remote" / f"{TOPIC}-{p}" / "manifest.json"
        doc = json.loads(path.read_text()) if path.exists() else {"segments": []}
        done = [s["end_offset"] + 1 for s in doc["segments"] if s["state"] == "COPY_FINISHED"]
        ends += max(done, default=0)
    return ends / max(1, sum(latest.values()))


def bench_spark(args: Any) -> dict[str, Any]:
    from tierlog.client import LATEST, LogClient
    from tierlog.spark import session

    quick = bool(args.quick)
    records = args.spark_records or (200_000 if quick else 2_000_000)
    run_dir = Path(__file__).parent / ".work" / "spark_read"
    shutil.rmtree(run_dir, ignore_errors=True)
    proc, bootstrap, data = start_tierlog(run_dir)
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
        spark = session("spark-read-bench", master="local[2]", delta=False, kafka_source=True)
        tierlog_df = (
            spark.read.format("tierlog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("remote.log.storage.url", (data / "remote").resolve().as_uri())
            .load()
        )
        kafka_df = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .load()
        )
        query = ("count(*) as n", "sum(length(value)) as bytes")
        answers: dict[str, tuple[int, int]] = {}
        times: dict[str, list[float]] = {"tierlog": [], "kafka": []}
        for name, df in (("tierlog", tierlog_df), ("kafka", kafka_df)):  # warm-up
            row = df.selectExpr(*query).collect()[0]
            answers[name] = (int(row["n"]), int(row["bytes"]))
        if answers["tierlog"] != answers["kafka"] or answers["kafka"][0] != records:
            raise SystemExit(f"the sources disagree: {answers} for {records} records")
        for _ in range(args.spark_repeats or (2 if quick else 3)):
            for name, df in (("kafka", kafka_df), ("tierlog", tierlog_df)):
                t0 = time.perf_counter()
                df.selectExpr(*query).collect()
                times[name].append(time.perf_counter() - t0)
        spark.stop()
    finally:
        proc.stop()
    best = {k: min(v) for k, v in times.items()}
    return {
        "records": records,
        "record_bytes": 200,
        "partitions": PARTITIONS,
        "remote_share": round(share, 3),
        "tierlog_s": round(best["tierlog"], 3),
        "kafka_source_s": round(best["kafka"], 3),
        "tierlog_records_per_s": round(records / best["tierlog"]),
        "kafka_source_records_per_s": round(records / best["kafka"]),
        "ratio_tierlog_vs_kafka_source": round(best["kafka"] / best["tierlog"], 2),
        "all_s": times,
    }
