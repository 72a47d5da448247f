"""The cells of ``notebooks/replay_from_object_storage.ipynb``: a Delta table rebuilt
from the remote tier alone."""

from __future__ import annotations

from pipelines.notebooks.cells import STOP_SPARK, SUMMARY, code, md, parameters

CELLS = [
    md("""\
        # Replay a range straight from object storage

        Rebuilds a Delta table from the remote tier alone (`pipelines.replay`): no broker
        is contacted, so it works with the broker down and after the broker's local
        segments are gone. The target table is overwritten. Offsets the broker has not
        offloaded yet are not in object storage, so they are not in the replay.
        """),
    parameters("""\
        # What `make demo` leaves: its topic and its remote tier (no broker needed).
        topic = "activity"
        remote_url = "data/demo/logs/remote"  # the broker's remote.log.storage.url, or a path
        storage_options = {}
        table_path = "data/delta/activity_replay"
        # An offset range [start, end): "earliest"/"latest" or JSON {"topic": {"0": 23}} ...
        starting_offsets = "earliest"
        ending_offsets = "latest"
        # ... or a time range instead: ms since the epoch or ISO 8601 with an offset.
        starting_timestamp = None  # e.g. "2024-05-01T00:00:00Z"
        ending_timestamp = None
        spark_master = None  # None: $SPARK_MASTER, else local[*]
        """),
    code("""\
        import time
        from datetime import datetime

        import pandas as pd
        from pyspark.sql import functions as F

        from pipelines.common import spark_session, table_location
        from pipelines.replay import replay


        def as_time(value):
            \"\"\"A timestamp parameter: ms since the epoch, or ISO 8601 text with an offset.\"\"\"
            if isinstance(value, str):
                return datetime.fromisoformat(value)
            return value


        spark = spark_session({"app_name": "replay_from_object_storage", "master": spark_master})
        """),
    md("## Replay"),
    code("""\
        started = time.monotonic()
        result = replay(
            spark,
            topic=topic,
            remote_url=remote_url,
            table_path=table_path,
            storage_options=storage_options,
            starting_offsets=starting_offsets,
            ending_offsets=ending_offsets,
            starting_timestamp=as_time(starting_timestamp),
            ending_timestamp=as_time(ending_timestamp),
        )
        replay_s = time.monotonic() - started
        print(f"{result.rows:,} rows in {table_location(table_path)} ({replay_s:.1f} s)")
        pd.DataFrame(
            [(p, lo, hi) for p, (lo, hi) in sorted(result.offsets.items())],
            columns=["partition", "first offset", "last offset"],
        )
        """),
    md("## The rebuilt table"),
    code("""\
        table = spark.read.format("delta").load(table_location(table_path))
        span = table.agg(F.min("timestamp").alias("first"), F.max("timestamp").alias("last"))
        span = span.collect()[0]
        print(f"record timestamps from {span['first']} to {span['last']} (UTC)")
        (
            table.orderBy("partition", "offset")
            .selectExpr(
                "partition", "offset", "timestamp", "tier", "string(key) AS key",
                "string(value) AS value",
            )
            .limit(5)
            .toPandas()
        )
        """),
    code("""\
        summary = {
            "topic": topic,
            "table_path": table_location(table_path),
            "rows": result.rows,
            "table_version": result.table_version,
            "offsets": {str(p): list(lo_hi) for p, lo_hi in result.offsets.items()},
            "first_timestamp": span["first"].isoformat() if span["first"] else None,
            "last_timestamp": span["last"].isoformat() if span["last"] else None,
            "replay_s": round(replay_s, 2),
        }
        """),
    code(STOP_SPARK),
    code(SUMMARY),
]
