"""The cells of ``notebooks/ingest_to_delta.ipynb``: a topic into a bronze Delta table
and its silver aggregate."""

from __future__ import annotations

from pipelines.notebooks.cells import STOP_SPARK, SUMMARY, code, md, parameters

CELLS = [
    md("""\
        # Ingest a topic into Delta

        Appends the topic's records the bronze table does not hold yet — exactly once, read
        from object storage where they are offloaded and from the broker above that
        (`pipelines.ingest`) — then recomputes page views per minute per page into a
        silver table (`pipelines.aggregate`).
        """),
    parameters("""\
        # What `make demo` leaves, served again by `tierlog demo serve`.
        bootstrap_servers = "127.0.0.1:9092"
        topic = "activity"
        table_path = "data/delta/activity"
        # The broker's remote.log.storage.url (a plain path is a local directory).
        # None: ask the broker; "": read everything through the broker.
        remote_url = None
        storage_options = {}
        # None: <table_path>_page_views_per_minute; "": skip the aggregate.
        silver_path = None
        starting_offsets = "earliest"  # for partitions the table has not seen yet
        max_offsets = None  # read at most about this many offsets in this run
        spark_master = None  # None: $SPARK_MASTER, else local[*]
        """),
    code("""\
        import dataclasses
        import time

        import pandas as pd
        from pyspark.sql import functions as F

        from pipelines.aggregate import aggregate
        from pipelines.common import broker_remote_url, spark_session, table_location
        from pipelines.ingest import ingest

        if remote_url is None:
            remote_url = broker_remote_url(bootstrap_servers)
        remote_url = remote_url or None
        if silver_path is None:
            silver_path = f"{table_path.rstrip('/')}_page_views_per_minute"
        spark = spark_session({"app_name": "ingest_to_delta", "master": spark_master})
        print(f"remote tier: {remote_url or 'none: everything is read through the broker'}")
        """),
    md("## Ingest"),
    code("""\
        started = time.monotonic()
        result = ingest(
            spark,
            bootstrap_servers=bootstrap_servers,
            topic=topic,
            table_path=table_path,
            remote_url=remote_url,
            storage_options=storage_options,
            starting_offsets=starting_offsets,
            max_offsets=max_offsets,
        )
        ingest_s = time.monotonic() - started
        pd.Series(dataclasses.asdict(result), name=f"ingest ({ingest_s:.1f} s)").to_frame()
        """),
    md("## The bronze table\n\nRows per tier they were read from, and the newest rows:"),
    code("""\
        bronze = spark.read.format("delta").load(table_location(table_path))
        rows_in_table = bronze.count()
        print(f"{rows_in_table:,} rows in {table_location(table_path)}")
        bronze.groupBy("tier").count().toPandas()
        """),
    code("""\
        (
            bronze.orderBy(F.desc("ingest_version"), "partition", F.desc("offset"))
            .selectExpr(
                "partition", "offset", "timestamp", "tier", "string(key) AS key",
                "string(value) AS value", "ingest_version",
            )
            .limit(5)
            .toPandas()
        )
        """),
    md("## Page views per minute per page (silver)"),
    code("""\
        silver = None
        if silver_path:
            silver = aggregate(spark, bronze_path=table_path, silver_path=silver_path)
            display(
                spark.read.format("delta").load(table_location(silver_path))
                .orderBy(F.desc("minute"), F.desc("views")).limit(10).toPandas()
            )
        silver
        """),
    code("""\
        summary = {
            "topic": topic,
            "table_path": table_location(table_path),
            "rows_in_table": rows_in_table,
            "rows_written": result.rows_written,
            "from_remote": result.from_remote,
            "from_local": result.from_local,
            "skipped": result.skipped,
            "table_version": result.table_version,
            "txn_version": result.txn_version,
            "end_offsets": {str(p): o for p, o in result.end_offsets.items()},
            "ingest_s": round(ingest_s, 2),
            "remote_url": remote_url,
        }
        if silver is not None:
            summary.update(
                silver_path=table_location(silver_path),
                silver_rows=silver.rows,
                page_views=silver.views,
            )
        """),
    code(STOP_SPARK),
    code(SUMMARY),
]
