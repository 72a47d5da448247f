"""Bronze -> silver: page views per minute per page, the Kafka paper's activity use case.

Each bronze row's value is an activity event, JSON ``{"user", "event", "page", "ts"}``
(``tierlog.tools.activity``). Page views (``event == "page_view"``) are counted in
one-minute tumbling windows of the event's own ``ts`` — when the user viewed the page, not
when the broker or the ingest saw it — per page. The silver table has the columns
``minute`` (the window's start, a timestamp), ``page`` and ``views``.

Every run recomputes the whole table from bronze and overwrites it, instead of MERGE-ing
new counts in. Why: bronze holds all the events, and any ingest can bring events for any
minute (late or out-of-order ``ts``), so a MERGE would first have to find which minutes
the new rows touch and recount those from bronze anyway; the overwrite is idempotent by
construction (a re-run, or a run after a failed one, gives the same table), and at the
sizes here it takes seconds. The step past that is to recount only the minutes touched by
new ``ingest_version`` s and ``replaceWhere`` them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.common import Key, latest_version, main, non_empty, table_location

EVENT_SCHEMA = "user STRING, event STRING, page STRING, ts LONG"


@dataclass(frozen=True)
class AggregateResult:
    """The silver table now: rows (minute, page pairs), total views, version."""

    rows: int
    views: int
    table_version: int


def page_views_per_minute(bronze: Any) -> Any:
    """The silver rows of a bronze DataFrame: ``minute``, ``page``, ``views``.

    Values that are not activity JSON (or lack ``page`` or ``ts``) are not counted.
    """
    from pyspark.sql import functions as F

    events = bronze.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")
    ).select("e.*")
    views = events.where(
        (F.col("event") == "page_view") & F.col("page").isNotNull() & F.col("ts").isNotNull()
    )
    return (
        views.groupBy(F.window(F.timestamp_millis("ts"), "1 minute").alias("w"), "page")
        .agg(F.count("*").alias("views"))
        .select(F.col("w.start").alias("minute"), "page", "views")
    )


def aggregate(spark: Any, *, bronze_path: str, silver_path: str) -> AggregateResult:
    """Recompute the silver table from the bronze one and overwrite it.

    Args:
        spark: a session with Delta (``tierlog.spark.session``).
        bronze_path: the bronze table (``ingest``'s, ``ingest_stream``'s or ``replay``'s).
        silver_path: the silver table to overwrite (created if missing).

    Returns:
        What the silver table holds now.
    """
    from pyspark.sql import functions as F

    silver = table_location(silver_path)
    bronze = spark.read.format("delta").load(table_location(bronze_path))
    (
        page_views_per_minute(bronze)
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(silver)
    )
    version = latest_version(spark, silver)
    totals = (
        spark.read.format("delta")
        .option("versionAsOf", version)
        .load(silver)
        .agg(F.count("*").alias("rows"), F.sum("views").alias("views"))
        .collect()[0]
    )
    return AggregateResult(
        rows=int(totals["rows"]), views=int(totals["views"] or 0), table_version=version
    )


KEYS = (
    Key("bronze_path", (str,), parse=non_empty),
    Key("silver_path", (str,), parse=non_empty),
)


def cli(argv: Sequence[str] | None = None) -> int:
    """``python -m pipelines.aggregate --config configs/aggregate.toml``."""
    return main("aggregate", KEYS, aggregate, argv, description="page views per minute per page")


if __name__ == "__main__":
    sys.exit(cli())
