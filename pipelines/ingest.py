"""Topic -> bronze Delta table, incremental and exactly once.

The bronze table holds the ``tierlog`` source's columns (key, value, topic, partition,
offset, timestamp, timestampType, headers) plus ``tier`` (where the row was read from),
``ingested_at`` and ``ingest_version`` (the Delta ``txnVersion`` of the commit that wrote
the row).

A run plans, then writes:

1. **plan** (``plan_ingest``): the table's latest version V and, from that snapshot,
   ``max(offset) + 1`` of every partition: the offsets are kept in the table itself, so
   there is no side file that could disagree with it. Partitions the table has never seen
   start at ``starting_offsets``. Each partition ends at its log end now (shared out by
   ``max_offsets``), so the run reads a fixed range and a steady stream cannot keep it busy.
2. **write** (``write_ingest``): read exactly those ranges and append them with Delta's
   idempotent writes, ``txnAppId = "tierlog-ingest:<topic>"``, ``txnVersion = V + 1``
   (0 for a new table). Delta records the pair in the commit and drops a later write
   whose txnVersion is not above the recorded one.

Why that is exactly once: the start offsets are a function of the snapshot V, and so is
the txnVersion. Two runs that planned from the same snapshot would write the same rows
from the same start; they carry the same txnVersion, so whichever commits second is
skipped by Delta (or, when both are mid-commit, fails Delta's conflict check on the app
id, which is the same outcome). A run killed before its commit leaves only unreferenced
files, so the table is still at V and a re-run plans exactly what it planned; a run
killed after its commit leaves V + 1 with those rows, and a re-run starts after them.
Skipping never loses data: the next run starts from what the table holds.

The one window left: a commit that is not an ingest (OPTIMIZE, a schema change) landing
between two concurrent runs' planning gives them different txnVersions for overlapping
ranges. Run one ingest per table at a time (the scheduler's job lock does that).
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipelines.common import (
    Key,
    TopicSource,
    latest_version,
    main,
    non_empty,
    offsets_json,
    offsets_spec,
    positive,
    table_location,
)
from tierlog.spark.planning import LOCAL, REMOTE

APP_ID_PREFIX = "tierlog-ingest:"
# How far back write_ingest looks in the table's history for its own commit; only
# commits that land while one run writes push it down, so a handful is plenty.
HISTORY_LOOKBACK = 100
# The values of the source's ``tier`` column.
TIERS = (REMOTE, LOCAL)


@dataclass(frozen=True)
class IngestPlan:
    """What one run reads and the Delta transaction it writes with.

    ``table_version`` is the snapshot the start offsets were read from (-1: no table yet);
    ``start``/``end`` are offsets ``[start, end)`` per partition.
    """

    topic: str
    table_version: int
    start: dict[int, int]
    end: dict[int, int]

    @property
    def app_id(self) -> str:
        return APP_ID_PREFIX + self.topic

    @property
    def txn_version(self) -> int:
        # A function of the snapshot planned from: see the module docstring.
        return self.table_version + 1

    @property
    def offsets_to_read(self) -> int:
        return sum(max(0, self.end[p] - self.start[p]) for p in self.end)


@dataclass(frozen=True)
class IngestResult:
    """What one run did.

    ``table_version`` is the version holding this run's rows, or the table's latest version
    when it wrote none. ``skipped``: Delta dropped the write because a run planned from the
    same snapshot had committed it (``rows_written`` is then 0).
    """

    rows_written: int
    from_remote: int
    from_local: int
    table_version: int
    skipped: bool
    txn_version: int
    start_offsets: dict[int, int] = field(default_factory=dict)
    end_offsets: dict[int, int] = field(default_factory=dict)


def ingest(
    spark: Any,
    *,
    bootstrap_servers: str,
    topic: str,
    table_path: str,
    remote_url: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    starting_offsets: str | dict[str, Any] = "earliest",
    max_offsets: int | None = None,
) -> IngestResult:
    """Append the topic's offsets the bronze table does not hold yet, exactly once.

    Args:
        spark: a session from ``tierlog.spark.session`` (Delta and the source set up).
        bootstrap_servers: the cluster.
        topic: the topic to ingest.
        table_path: the bronze table (created by the first run).
        remote_url: the broker's ``remote.log.storage.url`` (a plain path is a local
            directory): closed segments are then read straight from object storage.
        storage_options: fsspec options of the remote tier.
        starting_offsets: where partitions the table has not seen start: "earliest",
            "latest" or JSON ``{"topic": {"0": 23}}``.
        max_offsets: read at most about this many offsets in this run (the rest is left for
            the next one); None: everything up to the log end.

    Returns:
        The run's result.

    Raises:
        ConfigError: ``starting_offsets`` is malformed.
        SourceError: the topic does not exist, or offsets to read were deleted by retention.
    """
    source = TopicSource(
        topic,
        bootstrap_servers=bootstrap_servers,
        remote_url=remote_url,
        storage_options=storage_options or {},
    )
    path = table_location(table_path)
    plan = plan_ingest(
        spark, source, path, starting_offsets=starting_offsets, max_offsets=max_offsets
    )
    return write_ingest(spark, source, plan, path)


def plan_ingest(
    spark: Any,
    source: TopicSource,
    table_path: str,
    *,
    starting_offsets: str | dict[str, Any] = "earliest",
    max_offsets: int | None = None,
) -> IngestPlan:
    """The next run's plan from the table's latest snapshot (step 1 of the module docstring).

    Raises:
        ConfigError: ``starting_offsets`` is malformed.
        SourceError: the topic does not exist.
    """
    from tierlog.spark.planning import OffsetRange, limit_ranges
    from tierlog.util.configdef import ConfigError

    try:
        starting = offsets_spec(starting_offsets)
    except ValueError as exc:
        raise ConfigError("starting_offsets", str(exc)) from None
    version = latest_version(spark, table_path)
    held = _next_offsets(spark, table_path, version, source.topic) if version >= 0 else {}
    first, latest = source.offsets(starting)
    start = {p: held.get(p, first[p]) for p in latest}
    ranges = [OffsetRange(source.topic, p, start[p], max(start[p], latest[p])) for p in latest]
    ranges = limit_ranges(ranges, max_offsets)
    return IngestPlan(
        topic=source.topic,
        table_version=version,
        start={r.partition: r.start for r in ranges},
        end={r.partition: r.end for r in ranges},
    )


def write_ingest(
    spark: Any, source: TopicSource, plan: IngestPlan, table_path: str
) -> IngestResult:
    """Read the plan's ranges and append them with the plan's Delta transaction (step 2).

    Calling this twice with one plan is what two runs planned from one snapshot do: the
    second call is skipped by Delta and says so.
    """
    from delta.exceptions import ConcurrentTransactionException
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    if plan.offsets_to_read == 0:
        return _result(plan, latest_version(spark, table_path), skipped=False, counts={})
    # The rows per tier are counted as they are written: reading the new version back
    # was one more Spark job over every row written (~2 s of a cold notebook's ingest).
    tier_counts = Observation("tierlog_ingest_tiers")
    rows = (
        source.read(
            spark,
            startingOffsets=offsets_json(plan.topic, plan.start),
            endingOffsets=offsets_json(plan.topic, plan.end),
        )
        .withColumn("ingested_at", F.current_timestamp())
        .withColumn("ingest_version", F.lit(plan.txn_version).cast("long"))
        .observe(tier_counts, *(_rows_in(tier).alias(tier) for tier in TIERS))
    )
    # Finding our own commit afterwards needs a mark only this run puts on it: the
    # txnVersion is shared with a concurrent duplicate by design.
    run_mark = json.dumps({"tierlog_ingest_run": uuid.uuid4().hex})
    # A run with our app id committing while this one commits makes Delta refuse this
    # write (ConcurrentTransactionException): the same outcome as a skip, and as safe, since
    # the next run starts from what the table holds.
    with contextlib.suppress(ConcurrentTransactionException):
        (
            rows.write.format("delta")
            .mode("append")
            .option("txnAppId", plan.app_id)
            .option("txnVersion", plan.txn_version)
            .option("userMetadata", run_mark)
            .save(table_path)
        )
    version = _commit_of(spark, table_path, run_mark)
    if version is None:
        # Not ours: Delta skipped the write, so nothing was observed (and get would wait).
        return _result(plan, latest_version(spark, table_path), skipped=True, counts={})
    # Our commit exists, so the write ran to its end and the counts are in.
    counts = {tier: int(count or 0) for tier, count in tier_counts.get.items()}
    return _result(plan, version, skipped=False, counts=counts)


def _rows_in(tier: str) -> Any:
    """How many rows come from ``tier``: a sum of 0/1, so an empty read counts 0 (or null)."""
    from pyspark.sql import functions as F

    return F.sum(F.when(F.col("tier") == tier, 1).otherwise(0))


def _next_offsets(spark: Any, table_path: str, version: int, topic: str) -> dict[int, int]:
    from pyspark.sql import functions as F

    rows = (
        spark.read.format("delta")
        .option("versionAsOf", version)
        .load(table_path)
        .where(F.col("topic") == topic)
        .groupBy("partition")
        .agg(F.max("offset").alias("last"))
        .collect()
    )
    return {int(r["partition"]): int(r["last"]) + 1 for r in rows}


def _commit_of(spark: Any, table_path: str, run_mark: str) -> int | None:
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, table_path):
        return None
    history = DeltaTable.forPath(spark, table_path).history(HISTORY_LOOKBACK)
    hits = history.where(history["userMetadata"] == run_mark).select("version").collect()
    return int(hits[0]["version"]) if hits else None


def _result(
    plan: IngestPlan, version: int, *, skipped: bool, counts: Mapping[str, int]
) -> IngestResult:
    return IngestResult(
        rows_written=sum(counts.values()),
        from_remote=counts.get("remote", 0),
        from_local=counts.get("local", 0),
        table_version=version,
        skipped=skipped,
        txn_version=plan.txn_version,
        start_offsets=dict(plan.start),
        end_offsets=dict(plan.end),
    )


KEYS = (
    Key("bootstrap_servers", (str,), parse=non_empty),
    Key("topic", (str,), parse=non_empty),
    Key("table_path", (str,), parse=non_empty),
    Key("remote_url", (str,), None, parse=non_empty),
    Key("storage_options", (dict,), None),
    Key("starting_offsets", (str, dict), "earliest", parse=offsets_spec),
    Key("max_offsets", (int,), None, parse=positive),
)


def cli(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.ingest --config configs/ingest.toml [--set key=value ...]``."""
    return main("ingest", KEYS, ingest, argv, description="topic -> bronze Delta table")


if __name__ == "__main__":
    sys.exit(cli())
