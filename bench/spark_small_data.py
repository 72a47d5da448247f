"""Spark on small data (issue 25 item 5): reading a Delta table the size of the demo's with
tierlog's local settings (``tierlog.spark.session.local_delta_settings``) against Delta's
own defaults, side by side in one Spark session.

Run: ``.venv/bin/python bench/spark_small_data.py [--quick] [--rows N] [--commits N]``
(``make .venv/.jars`` first). The last line printed is one JSON object with every figure.

A table of ``--rows`` rows (100,000: ``make demo``'s) written in ``--commits`` appends (an
ingest's runs) is read as the ingest notebook reads its bronze table: a count and a count
per tier. Before each read Delta's cache of table states is cleared, as a new notebook
kernel starts without it. The rounds alternate the two settings of
``spark.databricks.delta.snapshotPartitions``, so a slow spell of the shared machine falls
on both sides. Both sides check they read every row.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from reporting import LOWER, Report

from tierlog.spark.session import local_delta_settings, session

MASTER = "local[2]"
DELTA_DEFAULT_PARTITIONS = "50"  # Delta's own default of snapshotPartitions
KEY = "spark.databricks.delta.snapshotPartitions"


def write_table(spark: Any, path: Path, rows: int, commits: int) -> None:
    from pyspark.sql import functions as F

    per_commit = rows // commits
    for i in range(commits):
        first = i * per_commit
        count = per_commit if i < commits - 1 else rows - first
        frame = spark.range(first, first + count).select(
            F.col("id").alias("offset"),
            (F.col("id") % 2).cast("int").alias("partition"),
            F.when(F.col("id") % 3 == 0, "remote").otherwise("local").alias("tier"),
            F.concat(F.lit('{"event":"page_view","n":'), F.col("id"), F.lit("}")).alias("value"),
        )
        frame.write.format("delta").mode("append").save(str(path))


def read_once(spark: Any, path: Path, partitions: str) -> tuple[float, int]:
    """Seconds for a count and a count per tier, with Delta's state cache cleared first."""
    spark.conf.set(KEY, partitions)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    started = time.monotonic()
    table = spark.read.format("delta").load(str(path))
    rows = table.count()
    table.groupBy("tier").count().collect()
    return time.monotonic() - started, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows; not a claim")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--commits", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows = 20_000 if args.quick else args.rows
    rounds = 3 if args.quick else args.rounds
    report = Report("spark_small_data", quick=args.quick)
    local = local_delta_settings(MASTER)[KEY]
    # Delta's default for this session; each read sets its side's value.
    spark = session("bench-small-data", master=MASTER, conf={KEY: DELTA_DEFAULT_PARTITIONS})
    work = Path(tempfile.mkdtemp(prefix="tierlog-small-data-"))
    try:
        path = work / "bronze"
        write_table(spark, path, rows, args.commits)
        read_once(spark, path, local)  # warm-up: classes loaded, Python workers started
        seconds: dict[str, list[float]] = {"tierlog_local": [], "delta_default": []}
        for i in range(rounds):
            for side, partitions in (
                ("tierlog_local", local),
                ("delta_default", DELTA_DEFAULT_PARTITIONS),
            ):
                took, seen = read_once(spark, path, partitions)
                if seen != rows:
                    report.fail(f"{side} read {seen} rows of {rows}")
                seconds[side].append(took)
                report.say(f"round {i + 1}: {side} ({KEY}={partitions}) {took:.2f} s")
        report.side_by_side("delta_table_read", seconds, unit="s", better=LOWER, goal=1.0)
        report.data["details"] = {
            "rows": rows,
            "commits": args.commits,
            "master": MASTER,
            "snapshot_partitions": {
                "tierlog_local": local,
                "delta_default": DELTA_DEFAULT_PARTITIONS,
            },
        }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
