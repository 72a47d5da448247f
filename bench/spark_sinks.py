"""The write half of bench/spark_read.py: the ``tierlog`` sink (``tierlog.spark.sink``, a
Python producer per task) vs Spark's own Kafka sink (spark-sql-kafka-0-10, the Java
producer) writing the same DataFrame to one tierlog broker.

The DataFrame is built once and cached (``--sink-records`` rows of a 10-byte key and a
~200-byte value, 4 Spark partitions, local[2]); each timed pass writes it whole to a fresh
4-partition topic with ``mode("append")``, both sinks at their defaults (acks=all,
idempotent producers). Passes alternate between the sinks, after a warm-up write of each;
the median of each sink's passes is reported with their spread (the best beside it); every
pass's topic must then hold exactly the rows written. The ratio is Kafka sink time /
tierlog time.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from procs import wait_ready
from tierlog_ref import start_tierlog

PARTITIONS = 4


def _create(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(10)


def _written(bootstrap: str, topic: str) -> int:
    from tierlog.client import LATEST, LogClient

    with LogClient(bootstrap) as client:
        ends = client.list_offsets({(topic, p): LATEST for p in range(PARTITIONS)})
    return sum(ends.values())


def bench_sink(args: Any) -> dict[str, Any]:
    from tierlog.spark import session

    quick = bool(args.quick)
    records = args.sink_records or (100_000 if quick else 1_000_000)
    run_dir = Path(__file__).parent / ".work" / "spark_sink"
    shutil.rmtree(run_dir, ignore_errors=True)
    proc, bootstrap, _ = start_tierlog(run_dir)
    times: dict[str, list[float]] = {"tierlog": [], "kafka": []}
    try:
        wait_ready(proc, bootstrap, 60)
        spark = session("spark-sink-bench", master="local[2]", delta=False, kafka_source=True)
        df = (
            spark.range(records, numPartitions=PARTITIONS)
            .selectExpr(
                "format_string('user-%05d', id % 9973) as key",
                'concat(\'{"user":\', id % 9973, \',"event":"page_view","page":"/p/\', '
                "id % 500, '\",\"pad\":\"', repeat('x', 140), '\"}') as value",
            )
            .cache()
        )
        value_bytes = int(df.selectExpr("sum(length(value))").collect()[0][0])
        passes = args.spark_repeats or 3
        for n in range(passes + 1):  # the first pass of each is the warm-up
            for name in ("kafka", "tierlog") if n % 2 else ("tierlog", "kafka"):
                topic = f"sink-{name}-{n}"
                _create(bootstrap, topic)
                started = time.perf_counter()
                (
                    df.write.format(name)
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", topic)
                    .mode("append")
                    .save()
                )
                elapsed = time.perf_counter() - started
                got = _written(bootstrap, topic)
                if got != records:
                    raise SystemExit(f"{name} wrote {got} records of {records} to {topic}")
                if n:
                    times[name].append(elapsed)
        spark.stop()
    finally:
        proc.stop()
    best = {k: min(v) for k, v in times.items()}
    return {
        "records": records,
        "value_bytes_avg": round(value_bytes / records, 1),
        "partitions": PARTITIONS,
        "tierlog_s": round(best["tierlog"], 3),
        "kafka_sink_s": round(best["kafka"], 3),
        "tierlog_records_per_s": round(records / best["tierlog"]),
        "kafka_sink_records_per_s": round(records / best["kafka"]),
        "ratio_tierlog_vs_kafka_sink": round(best["kafka"] / best["tierlog"], 2),
        "all_s": {k: [round(t, 3) for t in v] for k, v in times.items()},
    }
