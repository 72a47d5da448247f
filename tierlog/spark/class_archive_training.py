"""The training run of ``class_archive`` (``python -m tierlog.spark.class_archive_training
DESTINATION``, which ``class_archive.build`` runs): a session whose JVM writes its class
archive to DESTINATION as it exits, and a workload of what a notebook's first minute does in
Spark, so the classes it loads are in the archive. A Python data source yielding Arrow
batches (as ``tierlog``'s does; the JVM side of planning and reading is the same for every
Python source), a Delta append with an idempotent transaction and an observation, reads,
aggregates, ``toPandas`` and the table's history.

It needs no broker: its source makes rows itself. This module imports pyspark, so only
the training run imports it.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from tierlog.spark.class_archive import DRIVER_JAVA_OPTIONS, TRAINING_TIMEOUT_S, ArchiveError

ROWS_PER_PARTITION = 1_000
PARTITIONS = 2
SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, tier string"
)


class TrainingSource(DataSource):
    """Rows shaped like the ``tierlog`` source's, made up."""

    @classmethod
    def name(cls) -> str:
        return "tierlog-class-archive-training"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> TrainingReader:
        return TrainingReader()


class TrainingReader(DataSourceReader):
    def partitions(self) -> list[InputPartition]:
        return [InputPartition(index) for index in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        index = partition.value
        offsets = list(range(ROWS_PER_PARTITION))
        yield pa.RecordBatch.from_pydict(
            {
                "key": [f"page-{n % 7}".encode() for n in offsets],
                "value": [f"event {n}".encode() for n in offsets],
                "topic": ["training"] * len(offsets),
                "partition": pa.array([index] * len(offsets), pa.int32()),
                "offset": offsets,
                "timestamp": pa.array(
                    [1_700_000_000_000_000 + n * 1_000_000 for n in offsets],
                    pa.timestamp("us", tz="UTC"),
                ),
                "timestampType": pa.array([0] * len(offsets), pa.int32()),
                "tier": ["remote" if n % 2 else "local" for n in offsets],
            }
        )


def run_workload(spark: Any) -> None:
    from delta.tables import DeltaTable
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    spark.dataSource.register(TrainingSource)
    with tempfile.TemporaryDirectory(prefix="tierlog-class-archive-") as scratch:
        bronze, silver = f"{scratch}/bronze", f"{scratch}/silver"
        rows = spark.read.format(TrainingSource.name()).load()
        observation = Observation("rows")
        counted = rows.observe(observation, F.count(F.lit(1)).alias("rows"))
        (
            counted.write.format("delta")
            .option("txnAppId", "tierlog-class-archive")
            .option("txnVersion", 0)
            .option("userMetadata", "training")
            .mode("append")
            .save(bronze)
        )
        assert observation.get["rows"] == ROWS_PER_PARTITION * PARTITIONS
        table = spark.read.format("delta").load(bronze)
        table.count()
        table.groupBy("tier").count().toPandas()
        table.orderBy(F.desc("offset")).limit(5).selectExpr("string(key) AS key").toPandas()
        history = DeltaTable.forPath(spark, bronze).history(5)
        history.where(history["userMetadata"] == "training").select("version").collect()
        (
            table.groupBy(F.window("timestamp", "1 minute").start.alias("minute"), "key")
            .count()
            .write.format("delta")
            .mode("overwrite")
            .save(silver)
        )
        spark.read.format("delta").load(silver).orderBy(F.desc("minute")).limit(3).toPandas()


def train(destination: Path) -> None:
    """A session whose JVM writes ``destination`` as it exits, the workload, then the JVM
    stopped and waited for, so the archive is complete when this returns."""
    from pyspark import SparkContext

    from tierlog.spark.session import session

    spark = session(
        "tierlog-class-archive",
        master="local[2]",
        conf={
            DRIVER_JAVA_OPTIONS: f"-XX:ArchiveClassesAtExit={destination}",
            "spark.ui.enabled": "false",
        },
    )
    gateway = SparkContext._gateway
    run_workload(spark)
    spark.stop()
    # The gateway JVM exits when its stdin closes; it writes the archive on the way out.
    proc = getattr(gateway, "proc", None)
    if proc is None:
        raise ArchiveError("the Spark JVM was not started by this process")
    if proc.stdin is not None:
        proc.stdin.close()
    proc.wait(TRAINING_TIMEOUT_S)


if __name__ == "__main__":
    # Through the module's own name, not __main__: Spark pickles the source's class for its
    # Python workers, by reference when it lives in an importable module.
    from tierlog.spark.class_archive_training import train as train_by_name

    train_by_name(Path(sys.argv[1]))
