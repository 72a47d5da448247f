"""The cells of ``notebooks/changelog_cache.ipynb``: a dict and a SQLite cache rebuilt
from a compacted topic."""

from __future__ import annotations

from pipelines.notebooks.cells import SUMMARY, code, md, parameters

CELLS = [
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

        from pipelines import client_security
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
        # TLS and SASL settings, if any, from TIERLOG_CLIENT_CONFIG (never printed).
        security = client_security.client_security()
        admin = AdminClient(
            {"bootstrap.servers": bootstrap_servers, **client_security.librdkafka()}
        )
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
                **client_security.librdkafka(),
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
            with ChangelogReader(topic, bootstrap=bootstrap_servers, security=security) as reader:
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
            states = broker_states({leader: address}, timeout=10, security=security)
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
            security=security,
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
            security=security,
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
