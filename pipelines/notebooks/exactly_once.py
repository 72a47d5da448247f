"""The cells of ``notebooks/exactly_once.ipynb``: topic -> transform -> topic -> Delta,
each input once."""

from __future__ import annotations

from pipelines.notebooks.cells import STOP_SPARK, SUMMARY, code, md, parameters

CELLS = [
    md("""\
        # Exactly once: topic -> transform -> topic -> Delta

        A consume-transform-produce job (`pipelines.exactly_once`): a read_committed
        consumer reads the source topic, each activity event gets its site section and the
        coordinates of its input record, and a transactional producer writes the results to
        a sink topic together with the consumer's offsets, so each batch's output and input
        progress commit or abort as one. Then the sink's committed records go into a Delta
        table exactly once. Kill either stage at any point and run the notebook again: no
        row is lost or doubled. The last section checks it: the table holds one row per
        input record the job's group has committed, and no input twice.
        """),
    parameters("""\
        bootstrap_servers = "127.0.0.1:9092"
        source_topic = "activity"
        sink_topic = "activity_enriched"  # created with the source's partitions when missing
        # The job: its group holds the committed input offsets, and it names the producer's
        # transactional.id, so a re-run fences a job left running.
        group_id = "tierlog-exactly-once"
        table_path = "data/delta/activity_enriched"
        # The broker's remote.log.storage.url (a plain path is a local directory).
        # None: ask the broker; "": read everything through the broker.
        remote_url = None
        storage_options = {}
        transaction_records = 1000  # a transaction ends at this many records ...
        transaction_ms = 1000  # ... or after this long, whichever comes first
        spark_master = None  # None: $SPARK_MASTER, else local[*]
        """),
    code("""\
        import dataclasses
        import time

        import pandas as pd
        from pyspark.sql import functions as F

        from pipelines.common import broker_remote_url, offsets_json, spark_session, table_location
        from pipelines.exactly_once import (
            CommittedTopicSource,
            committed_offsets,
            to_delta,
            transform,
        )

        if remote_url is None:
            remote_url = broker_remote_url(bootstrap_servers)
        remote_url = remote_url or None
        spark = spark_session({"app_name": "exactly_once", "master": spark_master})
        print(f"remote tier: {remote_url or 'none: everything is read through the broker'}")
        """),
    md("""\
        ## 1. Transform, in transactions

        Up to the source's last stable offset now, then it stops; a re-run starts from the
        offsets the group committed with the last transaction.
        """),
    code("""\
        started = time.monotonic()
        transformed = transform(
            bootstrap_servers=bootstrap_servers,
            source_topic=source_topic,
            sink_topic=sink_topic,
            group_id=group_id,
            transaction_records=transaction_records,
            transaction_ms=transaction_ms,
        )
        transform_s = time.monotonic() - started
        name = f"transform ({transform_s:.1f} s)"
        pd.Series(dataclasses.asdict(transformed), name=name).to_frame()
        """),
    md("""\
        ## 2. The sink into Delta

        Read with `kafka.isolation.level=read_committed`: aborted output (a killed job's
        last transaction) is never read, and an open transaction's is left for a later run.
        """),
    code("""\
        started = time.monotonic()
        ingested = to_delta(
            spark,
            bootstrap_servers=bootstrap_servers,
            sink_topic=sink_topic,
            table_path=table_path,
            remote_url=remote_url,
            storage_options=storage_options,
        )
        to_delta_s = time.monotonic() - started
        name = f"to_delta ({to_delta_s:.1f} s)"
        pd.Series(dataclasses.asdict(ingested), name=name).to_frame()
        """),
    md("""\
        ## 3. Exactly once?

        The input the group has committed: the source's records (read_committed) below its
        committed offsets. Every one of them must be in the table once, and nothing else:
        each row names its input record (`source`).
        """),
    code("""\
        committed = committed_offsets(bootstrap_servers, group_id, source_topic)
        source = CommittedTopicSource(
            source_topic, bootstrap_servers, remote_url, storage_options, include_headers=False
        )
        start, _ = source.offsets("earliest")
        ends = {p: o if o >= 0 else start[p] for p, o in committed.items()}
        input_committed = source.read(
            spark, startingOffsets="earliest", endingOffsets=offsets_json(source_topic, ends)
        ).count()

        SCHEMA = (
            "user STRING, event STRING, page STRING, ts LONG, section STRING, valid BOOLEAN,"
            " raw STRING, source STRUCT<topic: STRING, partition: INT, offset: LONG>"
        )
        table = spark.read.format("delta").load(table_location(table_path))
        events = table.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("e"))
        events = events.select("e.*")
        rows_in_table = table.count()
        distinct_inputs = events.select("source.topic", "source.partition", "source.offset")
        distinct_inputs = distinct_inputs.distinct().count()
        invalid = events.where(~F.col("valid")).count()
        print(
            f"committed input: {input_committed:,} records; table: {rows_in_table:,} rows "
            f"from {distinct_inputs:,} distinct input records ({invalid:,} not activity events)"
        )
        assert rows_in_table == input_committed == distinct_inputs, "not exactly once"
        per_section = events.where("valid").groupBy("section", "event").count()
        per_section.orderBy("section", "event").toPandas()
        """),
    code("""\
        summary = {
            "source_topic": source_topic,
            "sink_topic": sink_topic,
            "table_path": table_location(table_path),
            "transactional_id": transformed.transactional_id,
            "records_transformed": transformed.records,
            "transactions": transformed.transactions,
            "aborted_transactions": transformed.aborted,
            "committed_offsets": {str(p): o for p, o in committed.items()},
            "input_committed": input_committed,
            "rows_in_table": rows_in_table,
            "distinct_inputs_in_table": distinct_inputs,
            "invalid_in_table": invalid,
            "rows_written": ingested.rows_written,
            "table_version": ingested.table_version,
            "transform_s": round(transform_s, 2),
            "to_delta_s": round(to_delta_s, 2),
        }
        """),
    code(STOP_SPARK),
    code(SUMMARY),
]
