"""Compacted topic -> Delta table by MERGE: one row per live key, its latest value.

This is Delta's documented change-data-capture pattern applied to a changelog (a
``cleanup.policy=compact`` topic): take the latest change of each key by offset, then one
``MERGE INTO`` that updates keys whose change is newer than their row, inserts new keys
and deletes keys whose latest change is a tombstone (null value). Keyless records are
skipped (a compacted topic refuses them). The table::

    key BINARY, value BINARY, partition INT, offset BIGINT, timestamp TIMESTAMP

Two ways to run, same MERGE:

* **incremental batch** (no ``checkpoint_path``): the run plans from the table's latest
  version V: each partition starts where the last merge of this topic ended (recorded in
  that commit's ``userMetadata``) and ends at the log end now. The MERGE commits with
  ``txnAppId = "tierlog-changelog-merge:<topic>"``, ``txnVersion = V + 1`` (Delta's
  ``spark.databricks.delta.write.txnAppId``/``txnVersion`` session settings, which Delta
  honours for MERGE), so a second run planned from the same snapshot is skipped by Delta.
* **stream** (``checkpoint_path`` given): a Structured Streaming query,
  ``Trigger.AvailableNow``, whose ``foreachBatch`` does the MERGE with ``txnAppId`` = the
  query's id and ``txnVersion`` = the micro-batch id, Delta's recipe for idempotent writes
  from ``foreachBatch``: a micro-batch replayed after a crash is skipped if it committed.

Why re-reading never corrupts the table: every clause is guarded by offset (a row changes
only for a later offset of its partition), and a range read again ends at the same or a
later log end, so each key's latest change in it is the key's true latest change. If
the recorded end is not found (history older than ``HISTORY_LOOKBACK`` commits, or a table
written by hand) the run starts after the highest offset the table holds per partition,
which re-reads the tombstones after it and changes nothing they already changed.
"""

from __future__ import annotations

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

APP_ID_PREFIX = "tierlog-changelog-merge:"
MARK = "tierlog_changelog_merge"
# How far back a run looks in the table's history for the last merge of its topic.
HISTORY_LOOKBACK = 100
# Delta's session settings for idempotent DML and for the commit's userMetadata.
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
# A row changes only for a later change: of its own partition, or any change of another
# partition (a key that moved partitions, which a key-partitioned producer never does).
NEWER = "(s.partition <> t.partition OR s.offset > t.offset)"


@dataclass(frozen=True)
class MergeResult:
    """What one run did.

    ``offsets_read``: the offsets the run's ranges span (gaps of a cleaned log included);
    streaming, the records the query read (its progress reports' ``numInputRows``).
    ``keys_merged``: the MERGE's source rows (one per key changed); ``inserted``,
    ``updated``, ``deleted``: rows of the table, all from the commits' metrics (0 when
    nothing was committed). ``skipped``: Delta dropped the commit because one with the
    same txnAppId and txnVersion was there. ``batches``: MERGE commits made.
    """

    offsets_read: int
    keys_merged: int
    inserted: int
    updated: int
    deleted: int
    table_version: int
    skipped: bool
    txn_version: int
    batches: int = 1
    start_offsets: dict[int, int] = field(default_factory=dict)
    end_offsets: dict[int, int] = field(default_factory=dict)


def changelog_merge(
    spark: Any,
    *,
    bootstrap_servers: str,
    topic: str,
    table_path: str,
    remote_url: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    checkpoint_path: str | None = None,
    starting_offsets: str | dict[str, Any] = "earliest",
    max_offsets: int | None = None,
) -> MergeResult:
    """Merge the topic's changes the table has not seen into it, exactly once.

    Args:
        spark: a session from ``tierlog.spark.session``.
        bootstrap_servers: the cluster.
        topic: the compacted topic.
        table_path: the Delta table (created by the first run).
        remote_url: the broker's ``remote.log.storage.url``: closed segments are then read
            straight from object storage.
        storage_options: fsspec options of the remote tier.
        checkpoint_path: run as a stream with this checkpoint (see the module docstring).
        starting_offsets: where partitions never merged (or a new checkpoint) start.
        max_offsets: at most about this many offsets per run (per micro-batch when
            streaming); None: up to the log end.

    Raises:
        ConfigError: ``starting_offsets`` is malformed.
        SourceError: the topic does not exist, or offsets to read were deleted.
    """
    from tierlog.util.configdef import ConfigError

    try:
        starting = offsets_spec(starting_offsets)
    except ValueError as exc:
        raise ConfigError("starting_offsets", str(exc)) from None
    source = TopicSource(
        topic,
        bootstrap_servers=bootstrap_servers,
        remote_url=remote_url,
        storage_options=storage_options or {},
        include_headers=False,
    )
    path = table_location(table_path)
    if checkpoint_path is not None:
        return _merge_stream(
            spark, source, path, table_location(checkpoint_path), starting, max_offsets
        )
    return _merge_once(spark, source, path, starting, max_offsets)


# -- the MERGE both ways share --------------------------------------------------------------


def latest_changes(rows: Any) -> Any:
    """One row per key: its change with the highest offset (tombstones included)."""
    from pyspark.sql import functions as F

    latest = F.max_by(F.struct("value", "partition", "offset", "timestamp"), "offset")
    return (
        rows.where(F.col("key").isNotNull())
        .groupBy("key")
        .agg(latest.alias("c"))
        .select("key", "c.value", "c.partition", "c.offset", "c.timestamp")
    )


def merge_changes(
    spark: Any, path: str, changes: Any, app_id: str, txn_version: int, metadata: str
) -> None:
    """MERGE ``changes`` (``latest_changes``' shape) into the table at ``path`` in one Delta
    commit carrying ``app_id``/``txn_version`` and ``metadata`` (Delta skips it when a
    commit with that app id and a version at least ``txn_version`` is there)."""
    from delta.tables import DeltaTable

    ensure_table(spark, path)
    columns = ("key", "value", "partition", "offset", "timestamp")
    values: dict[str, Any] = {c: f"s.{c}" for c in columns}
    conf = spark.conf
    conf.set(TXN_APP_ID, app_id)
    conf.set(TXN_VERSION, str(txn_version))
    conf.set(USER_METADATA, metadata)
    try:
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(changes.alias("s"), "t.key = s.key")
            .whenMatchedDelete(condition=f"s.value IS NULL AND {NEWER}")
            .whenMatchedUpdate(condition=f"s.value IS NOT NULL AND {NEWER}", set=values)
            .whenNotMatchedInsert(condition="s.value IS NOT NULL", values=values)
            .execute()
        )
    finally:
        # Session-wide: left set, they would make Delta skip this session's later writes.
        for name in (TXN_APP_ID, TXN_VERSION, USER_METADATA):
            conf.unset(name)


def ensure_table(spark: Any, path: str) -> None:
    """Create the empty table at ``path`` unless it exists."""
    from delta.tables import DeltaTable
    from pyspark.sql import types as T

    if not DeltaTable.isDeltaTable(spark, path):
        schema = T.StructType(
            [
                T.StructField("key", T.BinaryType()),
                T.StructField("value", T.BinaryType()),
                T.StructField("partition", T.IntegerType()),
                T.StructField("offset", T.LongType()),
                T.StructField("timestamp", T.TimestampType()),
            ]
        )
        DeltaTable.createIfNotExists(spark).location(path).addColumns(schema).execute()


# -- incremental batch ----------------------------------------------------------------------


def _merge_once(
    spark: Any, source: TopicSource, path: str, starting: str, max_offsets: int | None
) -> MergeResult:
    from tierlog.spark.planning import OffsetRange, limit_ranges

    version = latest_version(spark, path)
    held = _merged_ends(spark, path, source.topic) if version >= 0 else {}
    first, latest = source.offsets(starting)
    start = {p: held.get(p, first[p]) for p in latest}
    ranges = [OffsetRange(source.topic, p, start[p], max(start[p], latest[p])) for p in latest]
    ranges = limit_ranges(ranges, max_offsets)
    start = {r.partition: r.start for r in ranges}
    end = {r.partition: r.end for r in ranges}
    txn_version = version + 1
    spanned = sum(end[p] - start[p] for p in end)
    if spanned <= 0:
        return MergeResult(0, 0, 0, 0, 0, version, False, txn_version, 0, start, end)
    rows = source.read(
        spark,
        startingOffsets=offsets_json(source.topic, start),
        endingOffsets=offsets_json(source.topic, end),
    )
    run = uuid.uuid4().hex
    metadata = json.dumps({MARK: {"topic": source.topic, "end": end, "run": run}})
    app_id = APP_ID_PREFIX + source.topic
    merge_changes(spark, path, latest_changes(rows), app_id, txn_version, metadata)
    commit = _commit_of(spark, path, run)
    if commit is None:
        skipped_at = latest_version(spark, path)
        return MergeResult(spanned, 0, 0, 0, 0, skipped_at, True, txn_version, 0, start, end)
    committed_version, metrics = commit
    return MergeResult(
        spanned, *_counts(metrics), committed_version, False, txn_version, 1, start, end
    )


def _merged_ends(spark: Any, path: str, topic: str) -> dict[int, int]:
    """Where the last merge of ``topic`` ended, per partition: from its commit's mark, else
    after the highest offset the table holds (see the module docstring)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    history = DeltaTable.forPath(spark, path).history(HISTORY_LOOKBACK)
    marks = (
        history.where(history["userMetadata"].contains(MARK))
        .orderBy(F.col("version").desc())
        .select("userMetadata")
        .collect()
    )
    for row in marks:
        mark = json.loads(row["userMetadata"]).get(MARK, {})
        if mark.get("topic") == topic:
            return {int(p): int(o) for p, o in mark["end"].items()}
    rows = (
        spark.read.format("delta")
        .load(path)
        .groupBy("partition")
        .agg(F.max("offset").alias("last"))
        .collect()
    )
    return {int(r["partition"]): int(r["last"]) + 1 for r in rows}


def _commit_of(spark: Any, path: str, run: str) -> tuple[int, dict[str, str]] | None:
    """The version and operation metrics of this run's commit, None when Delta skipped it."""
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, path).history(HISTORY_LOOKBACK)
    hits = (
        history.where(history["userMetadata"].contains(run))
        .select("version", "operationMetrics")
        .collect()
    )
    if not hits:
        return None
    return int(hits[0]["version"]), dict(hits[0]["operationMetrics"] or {})


def _counts(metrics: Mapping[str, str]) -> tuple[int, int, int, int]:
    """Source rows, inserted, updated and deleted rows of a MERGE commit."""
    names = (
        "numSourceRows",
        "numTargetRowsInserted",
        "numTargetRowsUpdated",
        "numTargetRowsDeleted",
    )
    source, inserted, updated, deleted = (int(metrics.get(name, 0)) for name in names)
    return source, inserted, updated, deleted


# -- stream ---------------------------------------------------------------------------------


def _merge_stream(
    spark: Any,
    source: TopicSource,
    path: str,
    checkpoint: str,
    starting: str,
    max_offsets: int | None,
) -> MergeResult:
    before = latest_version(spark, path)
    name = f"tierlog-changelog-merge-{uuid.uuid4().hex[:12]}"

    def merge_batch(batch: Any, batch_id: int) -> None:
        # The query's id is kept in its checkpoint, so it names this table's writer across
        # restarts; a new checkpoint is a new writer whose batch ids start again at 0.
        (query_id,) = [str(q.id) for q in spark.streams.active if q.name == name]
        metadata = json.dumps({MARK: {"topic": source.topic, "query": query_id}})
        app_id = APP_ID_PREFIX + query_id
        merge_changes(spark, path, latest_changes(batch), app_id, batch_id, metadata)

    options = {"startingOffsets": starting}
    if max_offsets is not None:
        options["maxOffsetsPerTrigger"] = str(max_offsets)
    query = (
        source.read_stream(spark, **options)
        .writeStream.queryName(name)
        .foreachBatch(merge_batch)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()  # raises StreamingQueryException if a batch failed
    spanned = sum(int(progress.get("numInputRows", 0)) for progress in query.recentProgress or [])
    after = latest_version(spark, path)
    keys, inserted, updated, deleted, batches = _merged_since(spark, path, before, after)
    return MergeResult(spanned, keys, inserted, updated, deleted, after, False, -1, batches)


def _merged_since(spark: Any, path: str, before: int, after: int) -> tuple[int, int, int, int, int]:
    """Summed ``_counts`` of the MERGE commits after version ``before``, and their number."""
    from delta.tables import DeltaTable

    if after <= before:
        return 0, 0, 0, 0, 0
    history = DeltaTable.forPath(spark, path).history(after - before)
    commits = (
        history.where((history["version"] > before) & (history["operation"] == "MERGE"))
        .select("operationMetrics")
        .collect()
    )
    totals = [0, 0, 0, 0]
    for commit in commits:
        for n, count in enumerate(_counts(commit["operationMetrics"] or {})):
            totals[n] += count
    return totals[0], totals[1], totals[2], totals[3], len(commits)


KEYS = (
    Key("bootstrap_servers", (str,), parse=non_empty),
    Key("topic", (str,), parse=non_empty),
    Key("table_path", (str,), parse=non_empty),
    Key("remote_url", (str,), None, parse=non_empty),
    Key("storage_options", (dict,), None),
    Key("checkpoint_path", (str,), None, parse=non_empty),
    Key("starting_offsets", (str, dict), "earliest", parse=offsets_spec),
    Key("max_offsets", (int,), None, parse=positive),
)


def cli(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.changelog_merge --config configs/changelog_merge.toml``."""
    return main(
        "changelog_merge",
        KEYS,
        changelog_merge,
        argv,
        description="compacted topic -> Delta table by MERGE (latest value per key)",
    )


if __name__ == "__main__":
    sys.exit(cli())
