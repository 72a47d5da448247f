"""Write the notebooks in this directory from the cell sources below, so they are reviewed
and diffed as code; the ``.ipynb`` files are generated (committed without outputs).

    .venv/bin/python notebooks/build_notebooks.py          # rewrite the notebooks
    .venv/bin/python notebooks/build_notebooks.py --check  # exit 1 if one is out of date

Each notebook has a cell tagged ``parameters`` (papermill injects its parameters after it)
with small defaults, and ends with a cell showing its summary (``show_summary``: a table
to read, JSON for ``tierlog.jobs.summary.read_summary``). The logic lives in
``pipelines/`` (``changelog_cache``: in ``tierlog.compaction.changelog``); the cells call it
and show what it returns. Cell ids are derived from the notebook's name and the cell's
position, so rebuilding an unchanged notebook changes nothing.
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

CHANGELOG_CACHE = [
    md("""\
        # Rebuild a cache from a compacted topic

        The example of Kafka's design ("Log compaction"): a topic of user ids to e-mail
        addresses, each user's address updated many times, some users deleted. A compacted
        topic keeps the latest value of every key, so replaying it from offset 0 rebuilds
        the current state — here a Python dict and a SQLite table
        (`tierlog.compaction.changelog`) — whatever the log's age, without its full history.

        The notebook produces the changes, shows the log as produced and as the log cleaner
        leaves it (size on disk, records per key), rebuilds the cache and fails unless it
        equals the state computed from what was produced.
        """),
    parameters("""\
        # None: start a broker inside this notebook (EmbeddedBroker) with its log dir under
        # data_dir; a tierlog broker's "host:port" otherwise (it needs a fresh topic name).
        bootstrap_servers = None
        data_dir = "data/changelog_cache"  # the SQLite cache, and the embedded broker's log
        # dir (data_dir/broker, wiped at each run); log_dir: an external broker's log.dirs
        # on this machine, for the sizes on disk (None: sizes are not shown).
        log_dir = None
        topic = "users"
        users = 2000
        updates = 20000  # e-mail changes, spread over the users at random
        deleted_fraction = 0.1  # users deleted (a tombstone), never updated again
        segment_bytes = 65536  # small segments: the cleaner works on closed segments only
        seed = 12
        clean_timeout_s = 60
        """),
    code("""\
        %matplotlib inline
        import random
        import shutil
        import sqlite3
        import time
        from contextlib import closing
        from pathlib import Path

        import matplotlib.pyplot as plt
        import pandas as pd
        from confluent_kafka import Producer
        from confluent_kafka.admin import (
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            NewTopic,
            ResourceType,
        )
        from IPython.display import display

        from tierlog.broker.embedded import EmbeddedBroker
        from tierlog.compaction.changelog import ChangelogReader, rebuild_dict, rebuild_sqlite
        from tierlog.tools.cleaner_report import broker_states

        data = Path(data_dir)
        data.mkdir(parents=True, exist_ok=True)
        broker = None
        if bootstrap_servers is None:
            log_dir = data / "broker"
            shutil.rmtree(log_dir, ignore_errors=True)
            broker = EmbeddedBroker(
                {
                    "log.dirs": str(log_dir),
                    # Look for a log to clean every 100 ms (Kafka's default: 15 s).
                    "log.cleaner.backoff.ms": "100",
                }
            ).start()
            bootstrap_servers = broker.bootstrap
        print(f"broker: {'embedded, ' if broker else ''}{bootstrap_servers}; log dir: {log_dir}")
        """),
    md("""\
        ## The topic

        One partition, `cleanup.policy=compact`, small segments, and a cleaner that starts
        as soon as 1% of the log is dirty. Two settings are for the demo:

        * `min.compaction.lag.ms` of an hour holds the cleaner back while we look at the
          log as produced; it is set to 0 below, which lets the cleaner in.
        * The active (newest) segment is never cleaned, as in Kafka. `segment.ms=1000`
          rolls it at the first append a second after it started: the last change below,
          a user who signs up after a pause, does that, so every update before it lies in
          closed segments the cleaner may clean.

        `delete.retention.ms` keeps its default (a day): the deleted users' tombstones stay
        in the cleaned log, so a reader that falls behind by less than that still sees the
        deletes; the first pass after the delete horizon would remove them (KIP-534).
        """),
    code("""\
        HOLD_MS = 3_600_000
        admin = AdminClient({"bootstrap.servers": bootstrap_servers})
        topic_config = {
            "cleanup.policy": "compact",
            "segment.bytes": str(segment_bytes),
            "segment.ms": "1000",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": str(HOLD_MS),
        }
        admin.create_topics([NewTopic(topic, 1, 1, config=topic_config)])[topic].result(30)
        topic_config
        """),
    md("""\
        ## 1. Produce the changes

        Keys `user-<n>`, values e-mail addresses; a deleted user gets a record with a null
        value (a tombstone). `expected` is the state the changes leave, computed from the
        changes as they were acknowledged (one partition, an idempotent producer: in order).
        """),
    code("""\
        rng = random.Random(seed)
        live = [f"user-{n}" for n in range(users)]
        deleted = int(users * deleted_fraction)
        deleted_at = set(rng.sample(range(updates), deleted))
        changes = []  # (key, e-mail or None), in the order produced
        for step in range(updates):
            if step in deleted_at:
                changes.append((live.pop(rng.randrange(len(live))), None))
            key = rng.choice(live)
            changes.append((key, f"{key}.{step}@example.com"))

        failed = []
        producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "enable.idempotence": True,
                "linger.ms": 5,
                # A batch must fit in a segment (the broker refuses it otherwise).
                "batch.size": segment_bytes // 4,
            }
        )


        def produce(key, value):
            encoded = None if value is None else value.encode()
            producer.produce(
                topic,
                key=key.encode(),
                value=encoded,
                on_delivery=lambda error, _: error is None or failed.append(error),
            )
            producer.poll(0)


        def flush():
            assert producer.flush(30) == 0, "some changes were not delivered in 30 s"
            assert not failed, f"{len(failed)} changes failed, the first with {failed[0]}"


        for key, value in changes:
            produce(key, value)
        flush()
        time.sleep(1.2)  # past segment.ms: the next append rolls the active segment
        signup = (f"user-{users}", f"user-{users}.signup@example.com")
        changes.append(signup)
        produce(*signup)
        flush()

        expected = {}
        for key, value in changes:
            if value is None:
                expected.pop(key, None)
            else:
                expected[key] = value
        print(
            f"{len(changes):,} records produced: {updates:,} updates of {users:,} users, "
            f"{deleted:,} deletions, 1 sign-up; {len(expected):,} users remain"
        )
        """),
    md("""\
        ## 2. The log before cleaning

        Read from offset 0 with the changelog library: a `ChangelogReader` hands each
        partition's changes, in offset order, to a sink; this one keeps every record.
        """),
    code("""\
        class Records:
            # A changelog sink that keeps every record read: (offset, key, value or None).
            def __init__(self):
                self.rows = []
                self.position = 0

            def start(self, topic, topic_id):
                return {}

            def apply(self, changes):
                tombstones = set(changes.tombstones)
                rows = zip(changes.keys, changes.offsets, strict=True)
                for row, (key, offset) in enumerate(rows):
                    if offset >= self.position:  # a range handed over twice counts once
                        value = None if row in tombstones else bytes(changes.values[row]).decode()
                        self.rows.append((offset, key.decode(), value))
                self.position = max(self.position, changes.next_offset)


        def read_log():
            sink = Records()
            with ChangelogReader(topic, bootstrap=bootstrap_servers) as reader:
                reader.catch_up(sink)
            return pd.DataFrame(sink.rows, columns=["offset", "key", "value"])


        def segment_files():
            if log_dir is None:
                return []
            return sorted((Path(log_dir) / f"{topic}-0").glob("*.log"))


        def describe_log(log):
            files = segment_files()
            return {
                "records": len(log),
                "keys": log.key.nunique(),
                "tombstones": int(log.value.isna().sum()),
                "first offset": int(log.offset.min()),
                "last offset": int(log.offset.max()),
                "segments": len(files) if files else None,
                "bytes on disk": sum(f.stat().st_size for f in files) if files else None,
            }


        before = read_log()
        before_figures = describe_log(before)
        per_key_before = before.groupby("key").size()
        busiest = per_key_before.idxmax()
        pd.Series(before_figures, name="before cleaning").to_frame()
        """),
    md("Every change of the busiest user is still there:"),
    code("before[before.key == busiest]"),
    md("""\
        ## 3. Let the cleaner in

        `min.compaction.lag.ms=0`, then wait until the broker's cleaner state
        (`tierlog.log.cleaner.state`, what `tierlog topics describe` shows) says a pass
        has run and no dirty bytes are left.
        """),
    code("""\
        lag = ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
        lift = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[lag])
        admin.incremental_alter_configs([lift])[lift].result(30)

        metadata = admin.list_topics(topic, timeout=30)
        leader = metadata.topics[topic].partitions[0].leader
        address = (metadata.brokers[leader].host, metadata.brokers[leader].port)
        started = time.monotonic()
        while True:
            states = broker_states({leader: address}, timeout=10)
            if leader in states and states[leader] is None:
                raise RuntimeError(f"broker {leader} runs no log cleaner (log.cleaner.enable)")
            state = (states.get(leader) or {}).get((topic, 0))
            done = state and state["last_clean"] and not state["cleaning"]
            if done and state["dirty_ratio"] == 0:
                break
            if time.monotonic() - started > clean_timeout_s:
                raise TimeoutError(f"{topic}-0 not cleaned in {clean_timeout_s} s: {state}")
            time.sleep(0.2)
        clean_wait_s = time.monotonic() - started
        print(f"cleaned {clean_wait_s:.1f} s after the lag was lifted")
        pd.Series(state["last_clean"], name="the pass", dtype=object).to_frame()
        """),
    md("""\
        ## The log after cleaning

        The records left keep their offsets, so the log has gaps, which a reader from
        offset 0 steps over. The segments are as many as before, each much smaller: a pass
        groups segments by their size before cleaning (Kafka's `groupSegmentsBySize`), so
        small cleaned segments are merged by a later pass.
        """),
    code("""\
        after = read_log()
        after_figures = describe_log(after)
        per_key_after = after.groupby("key").size()
        pd.DataFrame({"before cleaning": before_figures, "after cleaning": after_figures})
        """),
    md("""\
        Records per key: how many keys have 1, 2, ... records in the log. Before cleaning,
        every update of a key is a record; after, one record per key is left — the latest
        e-mail address, or the tombstone of a deleted user — at its original offset.
        """),
    code("""\
        histogram = (
            pd.DataFrame(
                {
                    "keys before": per_key_before.value_counts(),
                    "keys after": per_key_after.value_counts(),
                }
            )
            .fillna(0)
            .astype(int)
            .rename_axis("records per key")
        )
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
        histogram["keys before"].plot.bar(ax=left, color="tab:gray", title="before cleaning")
        histogram["keys after"].plot.bar(ax=right, color="tab:blue", title="after cleaning")
        left.set_ylabel("keys")
        for ax in (left, right):
            ax.xaxis.set_major_locator(plt.MaxNLocator(12, integer=True))
        fig.tight_layout()
        plt.show()
        pd.DataFrame(
            {
                "before cleaning": per_key_before.describe()[["mean", "min", "50%", "max"]],
                "after cleaning": per_key_after.describe()[["mean", "min", "50%", "max"]],
            }
        ).rename_axis("records per key").round(2)
        """),
    md("The busiest user now, and some of the deleted users' tombstones:"),
    code("""\
        display(after[after.key == busiest])
        after[after.value.isna()].head()
        """),
    md("""\
        ## 4. Rebuild the cache and check it

        Into a dict (`rebuild_dict`) and into SQLite (`rebuild_sqlite`: upserts, deletes on
        tombstones, and the position it reached, so a later call resumes there). Both must
        equal `expected`: the notebook fails otherwise.
        """),
    code("""\
        started = time.monotonic()
        cache = rebuild_dict(
            topic,
            bootstrap=bootstrap_servers,
            key_decoder=bytes.decode,
            value_decoder=bytes.decode,
        )
        rebuild_dict_s = time.monotonic() - started

        database = data / f"{topic}.db"
        for stale in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
            stale.unlink(missing_ok=True)  # a fresh table: the topic is new each run
        started = time.monotonic()
        stats = rebuild_sqlite(
            database,
            topic,
            key_decoder=bytes.decode,
            value_decoder=bytes.decode,
            bootstrap=bootstrap_servers,
        )
        rebuild_sqlite_s = time.monotonic() - started
        with closing(sqlite3.connect(database)) as connection:
            table = dict(connection.execute("SELECT key, value FROM changelog"))


        def differences(rebuilt):
            keys = expected.keys() | rebuilt.keys()
            keys = sorted(k for k in keys if expected.get(k) != rebuilt.get(k))
            return f"{len(keys)} keys differ, e.g. " + ", ".join(
                f"{k}: expected {expected.get(k)!r}, got {rebuilt.get(k)!r}" for k in keys[:3]
            )


        assert cache == expected, f"the dict cache: {differences(cache)}"
        assert table == expected, f"the SQLite table {database}: {differences(table)}"
        matches_expected = cache == expected and table == expected
        print(
            f"{len(cache):,} keys rebuilt into a dict in {rebuild_dict_s:.2f} s and into "
            f"{database} in {rebuild_sqlite_s:.2f} s ({stats.changes:,} changes, "
            f"{stats.tombstones:,} tombstones): both equal the expected state"
        )
        pd.Series(cache, name="e-mail").rename_axis("user").to_frame().head()
        """),
    code("""\
        # The clients go first: no "disconnected" chatter when the broker stops.
        producer.close()
        del admin
        if broker is not None:
            broker.stop()  # a headless run ends here; re-run the set-up cell to go on
        """),
    code("""\
        summary = {
            "topic": topic,
            "broker": "embedded" if broker is not None else bootstrap_servers,
            "users": users,
            "updates": updates,
            "deleted_users": deleted,
            "records_produced": len(changes),
            "records_before": before_figures["records"],
            "records_after": after_figures["records"],
            "bytes_before": before_figures["bytes on disk"],
            "bytes_after": after_figures["bytes on disk"],
            "segments_before": before_figures["segments"],
            "segments_after": after_figures["segments"],
            "tombstones_after": after_figures["tombstones"],
            "max_records_per_key_after": int(per_key_after.max()),
            "keys_rebuilt": len(cache),
            "sqlite_rows": len(table),
            "sqlite_path": str(database),
            "matches_expected": matches_expected,
            "clean_wait_s": round(clean_wait_s, 2),
            "rebuild_dict_s": round(rebuild_dict_s, 3),
            "rebuild_sqlite_s": round(rebuild_sqlite_s, 3),
        }
        """),
    code(SUMMARY),
]

EXACTLY_ONCE = [
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
        spark_master = "local[*]"
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

NOTEBOOKS = {
    "explore_events": EXPLORE_EVENTS,
    "ingest_to_delta": INGEST_TO_DELTA,
    "replay_from_object_storage": REPLAY_FROM_OBJECT_STORAGE,
    "changelog_cache": CHANGELOG_CACHE,
    "exactly_once": EXACTLY_ONCE,
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
