"""Topic -> bronze Delta table with Structured Streaming: the ``ingest`` pipeline as a
``Trigger.AvailableNow`` query that reads what is there, writes it and stops.

Exactly once comes from Spark and Delta here, not from offsets kept in the table: the
checkpoint records each micro-batch's offsets before it runs, and the Delta sink commits
batch N with ``txnAppId = <query id>``, ``txnVersion = N``, so a batch replayed after a
crash is skipped if it had committed. Re-running with the same checkpoint starts after the
last committed batch; ``starting_offsets`` applies only to a new checkpoint.

The table holds the source's columns plus ``tier`` and ``ingested_at`` (the micro-batch's
time); it is not interchangeable with ``ingest``'s table (no ``ingest_version``), so give
each pipeline its own.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.common import (
    Key,
    TopicSource,
    latest_version,
    main,
    non_empty,
    offsets_spec,
    positive,
    table_location,
)


@dataclass(frozen=True)
class StreamResult:
    """One run: rows the Delta sink committed, in how many micro-batches, and the table's
    version afterwards."""

    rows_written: int
    batches: int
    table_version: int


def ingest_stream(
    spark: Any,
    *,
    bootstrap_servers: str,
    topic: str,
    table_path: str,
    checkpoint_path: str,
    remote_url: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    starting_offsets: str | dict[str, Any] = "earliest",
    max_offsets_per_trigger: int | None = None,
) -> StreamResult:
    """Run the streaming ingest once to the end of what is available now.

    Args:
        spark: a session from ``tierlog.spark.session``.
        bootstrap_servers: the cluster.
        topic: the topic to ingest.
        table_path: the bronze table.
        checkpoint_path: the query's checkpoint; keep it with the table (one per table).
        remote_url: the broker's ``remote.log.storage.url`` (a plain path is a local
            directory).
        storage_options: fsspec options of the remote tier.
        starting_offsets: where a new checkpoint starts ("earliest", "latest", JSON).
        max_offsets_per_trigger: the most offsets one micro-batch reads; a run reads up to
            the log ends at its start in as many micro-batches as that takes.

    Returns:
        What this run committed.

    Raises:
        ConfigError: ``starting_offsets`` is malformed.
        StreamingQueryException: the query failed (its cause is in the message).
    """
    from pyspark.sql import functions as F

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
    )
    path = table_location(table_path)
    options = {"startingOffsets": starting}
    if max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    before = latest_version(spark, path)
    query = (
        source.read_stream(spark, **options)
        .withColumn("ingested_at", F.current_timestamp())
        .writeStream.format("delta")
        .outputMode("append")
        .option("checkpointLocation", table_location(checkpoint_path))
        .trigger(availableNow=True)
        .start(path)
    )
    query.awaitTermination()  # raises StreamingQueryException if the query failed
    after = latest_version(spark, path)
    return StreamResult(*_committed_since(spark, path, before, after), table_version=after)


def _committed_since(spark: Any, path: str, before: int, after: int) -> tuple[int, int]:
    """Rows and commits of the sink's commits after version ``before``, from the table's
    history (the query's progress reports keep only the last hundred batches)."""
    from delta.tables import DeltaTable

    if after <= before:
        return 0, 0
    history = DeltaTable.forPath(spark, path).history(after - before)
    commits = (
        history.where((history["version"] > before) & (history["operation"] == "STREAMING UPDATE"))
        .select("operationMetrics")
        .collect()
    )
    rows = sum(int((c["operationMetrics"] or {}).get("numOutputRows", 0)) for c in commits)
    return rows, len(commits)


KEYS = (
    Key("bootstrap_servers", (str,), parse=non_empty),
    Key("topic", (str,), parse=non_empty),
    Key("table_path", (str,), parse=non_empty),
    Key("checkpoint_path", (str,), parse=non_empty),
    Key("remote_url", (str,), None, parse=non_empty),
    Key("storage_options", (dict,), None),
    Key("starting_offsets", (str, dict), "earliest", parse=offsets_spec),
    Key("max_offsets_per_trigger", (int,), None, parse=positive),
)


def cli(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.ingest_stream --config configs/ingest_stream.toml``."""
    return main(
        "ingest_stream",
        KEYS,
        ingest_stream,
        argv,
        description="topic -> bronze Delta table with Structured Streaming (AvailableNow)",
    )


if __name__ == "__main__":
    sys.exit(cli())
