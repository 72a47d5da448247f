"""Changelog rebuild speed: keys/s into a dict and into SQLite, tierlog's changelog library
(through the broker, and reading the cold tier straight from object storage) against a
plain confluent-kafka consumer loop doing the same, side by side in one run.

A tierlog broker runs on 127.0.0.1 (its own process) with the remote tier on file://
under its log dir, 1 MiB segments and 2 MiB of local retention per partition, so most
of the topic is only in object storage. The topic (4 partitions, ``cleanup.policy=compact``)
gets ``--keys`` distinct keys with 100-byte values, then a tenth of them deleted by
tombstones and another tenth updated (lz4, confluent-kafka). The broker's log cleaner is
off (``log.cleaner.enable=false``) so every way reads the same records: a cleaner pass
between two ways would leave the later ones less to read.

Each way reads the whole topic from offset 0 into a fresh target, ``--rounds`` times (3;
the median of the rounds is reported with their spread, ``bench/reporting.py``, and the
best round beside it):

* ``dict_broker`` / ``dict_store``: ``rebuild_dict`` without / with ``remote_url``;
* ``sqlite_broker`` / ``sqlite_store``: ``SqliteSink`` (one transaction per fetch, offsets
  stored with the rows) into a fresh database file;
* ``dict_confluent``: a confluent-kafka consumer assigned every partition at 0 (16 MiB
  fetches, ``fetch.queue.backoff.ms=0``, ``queued.min.messages=1000000``), ``consume`` in
  batches of 10,000, set or pop per message, until every partition reached its end;
* ``sqlite_confluent``: the same loop, upserting / deleting each consumed batch with
  ``executemany`` in one transaction (the table layout tierlog's sink uses).

Every result is checked against the model (same keys and values). ``keys_per_s`` is the
keys in the final state over the seconds (what a cache reload delivers);
``records_per_s`` counts every record read. ``ratio_*`` = tierlog / confluent-kafka.

Run (from the repository root)::

    .venv/bin/python bench/changelog_rebuild.py --quick        # 200k keys, ~2 min
    .venv/bin/python bench/changelog_rebuild.py                 # 1M keys, ~5 min

The LAST line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from procs import free_port, install_signal_handlers, start_process, wait_ready
from reporting import Report
from tierlog_ref import tierlog_command

from tierlog.compaction.changelog import ChangelogReader, DictSink, SqliteSink
from tierlog.remote.manifest import end_offset
from tierlog.remote.registry import open_store

TOPIC = "changelog"
PARTITIONS = 4
VALUE_BYTES = 100
SEGMENT_BYTES = 1 << 20
LOCAL_RETENTION_BYTES = 2 << 20
UPSERT = (
    'INSERT INTO changelog (key, value, "offset", partition) VALUES (?, ?, ?, ?) '
    'ON CONFLICT (key) DO UPDATE SET value = excluded.value, "offset" = excluded."offset", '
    "partition = excluded.partition"
)


def log(message: str) -> None:
    print(message, flush=True)


def start_broker(run_dir: Path) -> tuple[Any, str, Path]:
    port = free_port()
    data = run_dir / "data"
    config = run_dir / "server.properties"
    run_dir.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "\n".join(
            [
                "node.id=1",
                f"listeners=PLAINTEXT://127.0.0.1:{port}",
                f"log.dirs={data}",
                "offsets.topic.replication.factor=1",
                "group.initial.rebalance.delay.ms=0",
                f"log.segment.bytes={SEGMENT_BYTES}",
                "log.segment.delete.delay.ms=0",
                "log.retention.check.interval.ms=100",
                "remote.log.manager.task.interval.ms=100",
                "log.cleaner.enable=false",
                "",
            ]
        )
    )
    argv = [str(tierlog_command()), "broker", "start", "--config", str(config)]
    proc = start_process("tierlog", argv, run_dir / "tierlog.log")
    bootstrap = f"127.0.0.1:{port}"
    wait_ready(proc, bootstrap, timeout=60)
    return proc, bootstrap, data


def produce(bootstrap: str, keys: int, seed: int) -> dict[bytes, bytes]:
    """Every key once, then a tenth deleted and a tenth updated; returns the model."""
    # log_level 4 (warnings and up): no librdkafka info lines (BGQUEUE ... Purging at close).
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    config = {
        "cleanup.policy": "compact",
        "remote.storage.enable": "true",
        "local.retention.bytes": str(LOCAL_RETENTION_BYTES),
    }
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=config)])[TOPIC].result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 4,
        }
    )
    rng = random.Random(seed)
    model: dict[bytes, bytes] = {}
    # Random bytes: values that lz4 cannot shrink, so the log's size is the data's.
    tail = VALUE_BYTES - 10

    def send(key: bytes, value: bytes | None) -> None:
        while True:
            try:
                producer.produce(TOPIC, key=key, value=value)
                return
            except BufferError:
                producer.poll(0.05)

    names = [b"user-%09d" % n for n in range(keys)]
    for n, key in enumerate(names):
        value = b"%09d:" % n + rng.randbytes(tail)
        model[key] = value
        send(key, value)
    for key in rng.sample(names, keys // 10):
        model.pop(key, None)
        send(key, None)
    for key in rng.sample(names, keys // 10):
        value = b"updated:" + rng.randbytes(VALUE_BYTES - 8)
        model[key] = value
        send(key, value)
    assert producer.flush(120) == 0
    return model


def wait_offloaded(bootstrap: str, data: Path, timeout: float = 180) -> dict[str, int]:
    """Until every closed segment is remote and local retention trimmed the hot tier."""
    store = open_store(f"file://{data / 'remote'}")
    deadline = time.monotonic() + timeout
    while True:
        remote = {p: end_offset(store.read_manifest(TOPIC, p)) for p in range(PARTITIONS)}
        locals_ = {p: sorted((data / f"{TOPIC}-{p}").glob("*.log")) for p in range(PARTITIONS)}
        settled = all(
            files and max(remote[p], 0) == int(files[-1].stem)
            and sum(f.stat().st_size for f in files) <= LOCAL_RETENTION_BYTES + SEGMENT_BYTES
            for p, files in locals_.items()
        )  # fmt: skip
        if settled:
            consumer = Consumer(
                {"bootstrap.servers": bootstrap, "group.id": "ends", "log_level": 4}
            )
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
                for p in range(PARTITIONS)
            }
            consumer.close()
            return {
                "records": sum(ends.values()),
                "remote_records": sum(max(r, 0) for r in remote.values()),
            }
        if time.monotonic() > deadline:
            raise RuntimeError(f"not offloaded in {timeout}s: remote ends {remote}")
        time.sleep(0.2)


# -- the ways measured ---------------------------------------------------------------------


def tierlog_dict(bootstrap: str, remote_url: str | None) -> Callable[[Path], dict[bytes, Any]]:
    def run(_: Path) -> dict[bytes, Any]:
        sink = DictSink()
        with ChangelogReader(TOPIC, bootstrap=bootstrap, remote_url=remote_url) as reader:
            reader.catch_up(sink)
        return dict(sink.data)

    return run


def tierlog_sqlite(bootstrap: str, remote_url: str | None) -> Callable[[Path], dict[bytes, Any]]:
    def run(path: Path) -> dict[bytes, Any]:
        with (
            SqliteSink(path) as sink,
            ChangelogReader(TOPIC, bootstrap=bootstrap, remote_url=remote_url) as reader,
        ):
            reader.catch_up(sink)
        return read_table(path)

    return run


def confluent_consumer(bootstrap: str) -> tuple[Consumer, dict[int, int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "changelog-bench",
            "log_level": 4,
            "enable.auto.commit": False,
            "fetch.max.bytes": 16 << 20,
            "max.partition.fetch.bytes": 16 << 20,
            # As bench/tiered.py reads: no pause between fetches, a deep prefetch queue.
            "fetch.queue.backoff.ms": 0,
            "queued.min.messages": 1_000_000,
        }
    )
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
        for p in range(PARTITIONS)
    }
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    return consumer, ends


def confluent_dict(bootstrap: str) -> Callable[[Path], dict[bytes, Any]]:
    def run(_: Path) -> dict[bytes, Any]:
        consumer, ends = confluent_consumer(bootstrap)
        state: dict[bytes, Any] = {}
        pending = {p for p, end in ends.items() if end > 0}
        try:
            while pending:
                for message in consumer.consume(10_000, timeout=1.0):
                    if message.error() is not None:
                        raise RuntimeError(str(message.error()))
                    value = message.value()
                    if value is None:
                        state.pop(message.key(), None)
                    else:
                        state[message.key()] = value
                    if message.offset() + 1 >= ends[message.partition()]:
                        pending.discard(message.partition())
        finally:
            consumer.close()
        return state

    return run


def confluent_sqlite(bootstrap: str) -> Callable[[Path], dict[bytes, Any]]:
    def run(path: Path) -> dict[bytes, Any]:
        db = sqlite3.connect(path)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(
            "CREATE TABLE changelog (key BLOB PRIMARY KEY, value BLOB NOT NULL, "
            '"offset" INTEGER NOT NULL, partition INTEGER NOT NULL) WITHOUT ROWID'
        )
        consumer, ends = confluent_consumer(bootstrap)
        pending = {p for p, end in ends.items() if end > 0}
        try:
            while pending:
                upserts = []
                deletes = []
                for message in consumer.consume(10_000, timeout=1.0):
                    if message.error() is not None:
                        raise RuntimeError(str(message.error()))
                    value = message.value()
                    if value is None:
                        if upserts:  # keep the order: flush what came before
                            db.executemany(UPSERT, upserts)
                            upserts = []
                        deletes.append((message.key(),))
                    else:
                        if deletes:
                            db.executemany("DELETE FROM changelog WHERE key = ?", deletes)
                            deletes = []
                        upserts.append(
                            (message.key(), value, message.offset(), message.partition())
                        )
                    if message.offset() + 1 >= ends[message.partition()]:
                        pending.discard(message.partition())
                db.executemany(UPSERT, upserts)
                db.executemany("DELETE FROM changelog WHERE key = ?", deletes)
                db.commit()
        finally:
            consumer.close()
            db.close()
        return read_table(path)

    return run


def read_table(path: Path) -> dict[bytes, Any]:
    db = sqlite3.connect(path)
    try:
        return dict(db.execute("SELECT key, value FROM changelog"))
    finally:
        db.close()


def measure(
    name: str, run: Callable[[Path], dict[bytes, Any]], work: Path, rounds: int, model: dict
) -> dict[str, Any]:
    seconds = []
    for round_ in range(rounds):
        path = work / f"{name}-{round_}.db"
        start = time.perf_counter()
        cpu = time.process_time()
        state = run(path)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
        if state != model:
            raise AssertionError(f"{name}: {len(state)} keys, expected {len(model)}")
        seconds.append(elapsed)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        log(f"  {name} round {round_ + 1}: {elapsed:.2f} s ({cpu:.2f} s client CPU)")
    best = min(seconds)
    return {
        "seconds": round(best, 3),
        "rounds_s": [round(s, 3) for s in seconds],
        "keys_per_s": round(len(model) / best),
        "rounds_keys_per_s": [round(len(model) / s) for s in seconds],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200k keys")
    parser.add_argument("--keys", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    keys = args.keys or (200_000 if args.quick else 1_000_000)
    rounds = args.rounds or 3
    install_signal_handlers()
    report = Report("changelog_rebuild", quick=args.quick)
    work = Path(tempfile.mkdtemp(prefix="changelog-bench-"))
    proc = None
    try:
        proc, bootstrap, data = start_broker(work / "broker")
        log(f"broker on {bootstrap}; producing {keys} keys + updates and tombstones")
        start = time.perf_counter()
        model = produce(bootstrap, keys, seed=12)
        log(f"  produced in {time.perf_counter() - start:.1f} s; waiting for the offload")
        sizes = wait_offloaded(bootstrap, data)
        log(f"  {sizes['records']} records, {sizes['remote_records']} of them remote")
        remote_url = f"file://{data / 'remote'}"
        ways = {
            "dict_broker": tierlog_dict(bootstrap, None),
            "dict_store": tierlog_dict(bootstrap, remote_url),
            "dict_confluent": confluent_dict(bootstrap),
            "sqlite_broker": tierlog_sqlite(bootstrap, None),
            "sqlite_store": tierlog_sqlite(bootstrap, remote_url),
            "sqlite_confluent": confluent_sqlite(bootstrap),
        }
        results: dict[str, Any] = {}
        for name, run in ways.items():
            log(name)
            results[name] = measure(name, run, work, rounds, model)
            results[name]["records_per_s"] = round(sizes["records"] / results[name]["seconds"])
        ratios = {
            f"ratio_{target}_{way}_confluent": round(
                results[f"{target}_{way}"]["keys_per_s"]
                / results[f"{target}_confluent"]["keys_per_s"],
                2,
            )
            for target in ("dict", "sqlite")
            for way in ("broker", "store")
        }
        for target in ("dict", "sqlite"):
            for way in ("broker", "store"):
                ways_ = {
                    f"tierlog {way}": results[f"{target}_{way}"]["rounds_keys_per_s"],
                    "confluent-kafka": results[f"{target}_confluent"]["rounds_keys_per_s"],
                }
                report.side_by_side(f"rebuild {target} via {way}", ways_, unit="keys/s")
        report.data.update({
            "keys": len(model),
            "records": sizes["records"],
            "remote_records": sizes["remote_records"],
            "value_bytes": VALUE_BYTES,
            "partitions": PARTITIONS,
            "rounds": rounds,
            "cpus": os.cpu_count(),
            **results,
            **ratios,
        })  # fmt: skip
    finally:
        if proc is not None:
            proc.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"work directory kept: {work}")
    return report.finish()


if __name__ == "__main__":
    raise SystemExit(main())
