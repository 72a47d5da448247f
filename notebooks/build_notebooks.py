"""Write the notebooks in this directory from the cell sources below, so they are reviewed
and diffed as code; the ``.ipynb`` files are generated (committed without outputs).

    .venv/bin/python notebooks/build_notebooks.py          # rewrite the notebooks
    .venv/bin/python notebooks/build_notebooks.py --check  # exit 1 if one is out of date

Each notebook has a cell tagged ``parameters`` (papermill injects its parameters after it)
with small defaults, and ends with a cell showing its summary (``show_summary``: a table
to read, JSON for ``tierlog.jobs.summary.read_summary``). The logic lives in
``pipelines/``; the cells call it and show what it returns. Cell ids are derived from the
notebook's name and the cell's position, so rebuilding an unchanged notebook changes
nothing.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

import nbformat

HERE = Path(__file__).resolve().parent
# The kernel `tierlog lab` registers (tierlog.tools.lab): the venv's Python, started in the
# directory the lab was started from, so relative paths mean what they mean for the CLI.
# `tierlog notebook run` names its own kernel and ignores this.
METADATA = {
    "kernelspec": {"name": "tierlog", "display_name": "tierlog", "language": "python"},
    "language_info": {"name": "python"},
}


def md(text: str) -> tuple[str, str]:
    return "markdown", text


def code(text: str) -> tuple[str, str]:
    return "code", text


def parameters(text: str) -> tuple[str, str]:
    return "parameters", text


# Stopping Spark before the kernel exits lets the JVM shut down on its own terms: a JVM
# torn down with the kernel races its own temp-dir cleanup and prints a stack trace.
STOP_SPARK = "spark.stop()  # a headless run ends here; re-run the set-up cell to go on"

SUMMARY = """\
from tierlog.jobs.summary import show_summary

show_summary(summary)
"""

EXPLORE_EVENTS = [
    md("""\
        # Explore a topic across the hot and the cold tier

        Which topics the cluster has, where each partition's offsets live (object storage
        or the broker's disk), what the messages look like, and how many events arrived
        per minute — read through the `tierlog` Spark source from both tiers at once,
        with the point where each partition's reads switch tiers marked.
        """),
    parameters("""\
        bootstrap_servers = "127.0.0.1:9092"
        topic = "events"
        # The broker's remote.log.storage.url (a plain path is a local directory).
        # None: ask the broker; "": no remote tier, read everything through the broker.
        remote_url = None
        storage_options = {}  # fsspec options of the remote tier (e.g. S3 credentials)
        bin_seconds = 60  # width of a bar in the event-rate plot
        sample_count = 5  # messages shown per partition, oldest and newest
        spark_master = "local[*]"
        """),
    code("""\
        %matplotlib inline
        import dataclasses

        import pandas as pd
        from IPython.display import display

        from pipelines import explore
        from pipelines.common import TopicSource, broker_remote_url, spark_session

        if remote_url is None:
            remote_url = broker_remote_url(bootstrap_servers)
        remote_url = remote_url or None
        spark = spark_session({"app_name": "explore_events", "master": spark_master})
        source = TopicSource(
            topic, bootstrap_servers, remote_url, storage_options, include_headers=False
        )
        print(f"remote tier: {remote_url or 'none: everything is read through the broker'}")
        """),
    md("## Topics"),
    code("explore.topics(bootstrap_servers)"),
    md("""\
        ## Offsets per tier

        `log_start` is the first offset of the whole log; the remote tier (object storage)
        holds `[remote_start, remote_end)` per its manifest; the broker's disk holds
        `[local_start, latest)`. Where the two overlap, a reader takes the remote copy.
        """),
    code("""\
        tiers = explore.tier_offsets(bootstrap_servers, topic, remote_url, storage_options)
        pd.DataFrame([dataclasses.asdict(t) for t in tiers]).set_index("partition")
        """),
    md("## Sample messages\n\nThe oldest of each partition (usually the remote tier):"),
    code("explore.sample_messages(spark, source, sample_count, newest=False)"),
    md("and the newest (the broker's local tier):"),
    code("explore.sample_messages(spark, source, sample_count, newest=True)"),
    md("""\
        ## Event rate over time

        Every record of the topic, counted per bin of its timestamp and per tier it was
        read from; dashed lines mark each partition's first record read from the broker.
        """),
    code("""\
        rate = explore.event_rate(spark, source, bin_seconds)
        display(explore.plot_event_rate(rate))
        rate.per_minute.describe()
        """),
    code("""\
        totals = rate.totals()
        summary = {
            "topic": topic,
            "partitions": len(tiers),
            "messages": sum(t.latest - t.log_start for t in tiers),
            "offsets": [dataclasses.asdict(t) for t in tiers],
            "events_read": sum(totals.values()),
            "from_remote": totals.get("remote", 0),
            "from_local": totals.get("local", 0),
            "bin_seconds": bin_seconds,
            "bins": len(rate.bins),
            "tier_boundaries": {str(p): ts.isoformat() for p, ts in rate.boundaries.items()},
            "remote_url": remote_url,
        }
        """),
    code(STOP_SPARK),
    code(SUMMARY),
]

INGEST_TO_DELTA = [
    md("""\
        # Ingest a topic into Delta

        Appends the topic's records the bronze table does not hold yet — exactly once, read
        from object storage where they are offloaded and from the broker above that
        (`pipelines.ingest`) — then recomputes page views per minute per page into a
        silver table (`pipelines.aggregate`).
        """),
    parameters("""\
        bootstrap_servers = "127.0.0.1:9092"
        topic = "events"
        table_path = "data/delta/events"
        # The broker's remote.log.storage.url (a plain path is a local directory).
        # None: ask the broker; "": read everything through the broker.
        remote_url = None
        storage_options = {}
        # None: <table_path>_page_views_per_minute; "": skip the aggregate.
        silver_path = None
        starting_offsets = "earliest"  # for partitions the table has not seen yet
        max_offsets = None  # read at most about this many offsets in this run
        spark_master = "local[*]"
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

REPLAY_FROM_OBJECT_STORAGE = [
    md("""\
        # Replay a range straight from object storage

        Rebuilds a Delta table from the remote tier alone (`pipelines.replay`): no broker
        is contacted, so it works with the broker down and after the broker's local
        segments are gone. The target table is overwritten. Offsets the broker has not
        offloaded yet are not in object storage, so they are not in the replay.
        """),
    parameters("""\
        topic = "events"
        remote_url = "data/remote"  # the broker's remote.log.storage.url, or a local path
        storage_options = {}
        table_path = "data/delta/events_replay"
        # An offset range [start, end): "earliest"/"latest" or JSON {"topic": {"0": 23}} ...
        starting_offsets = "earliest"
        ending_offsets = "latest"
        # ... or a time range instead: ms since the epoch or ISO 8601 with an offset.
        starting_timestamp = None  # e.g. "2024-05-01T00:00:00Z"
        ending_timestamp = None
        spark_master = "local[*]"
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

NOTEBOOKS = {
    "explore_events": EXPLORE_EVENTS,
    "ingest_to_delta": INGEST_TO_DELTA,
    "replay_from_object_storage": REPLAY_FROM_OBJECT_STORAGE,
}


def build(name: str, cells: list[tuple[str, str]]) -> Any:
    """The notebook ``name`` as an nbformat node, without outputs."""
    nb = nbformat.v4.new_notebook(metadata=METADATA)
    for n, (kind, text) in enumerate(cells):
        source = textwrap.dedent(text).strip("\n")
        if kind == "markdown":
            cell = nbformat.v4.new_markdown_cell(source)
        else:
            cell = nbformat.v4.new_code_cell(source)
            if kind == "parameters":
                cell.metadata["tags"] = ["parameters"]
        cell.id = f"{name.replace('_', '-')}-{n:02d}"
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def render(name: str) -> str:
    """The ``.ipynb`` text of notebook ``name``."""
    return nbformat.writes(build(name, NOTEBOOKS[name])) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a notebook differs")
    args = parser.parse_args(argv)
    stale = []
    for name in NOTEBOOKS:
        path = HERE / f"{name}.ipynb"
        text = render(name)
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"out of date: {', '.join(stale)} (run {Path(__file__).name})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
