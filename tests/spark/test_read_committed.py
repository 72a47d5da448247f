"""``kafka.isolation.level=read_committed`` on a tiered topic read straight from object
storage (``tierlog.tiers=remote``, no broker asked). From S3 (moto's server): a log with
interleaved transactions, some aborted across segment boundaries, is offloaded by the real
remote log manager, and Spark returns exactly the committed records (read_uncommitted:
every data record; transaction markers never). From a real broker's file:// tier:
transactions offloaded while their markers are still local are not read, by batch or
stream, until the markers are remote (the remote tier's own last stable offset)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.remote.conftest import PARTITION, TOPIC, TOPIC_ID, S3Bucket, s3_bucket, s3_server  # noqa: F401
from tests.spark.streams import run_available_now
from tests.tiered_data import TieredTopic, create_tiered_topic, start_broker
from tests.txn_data import append_transactions
from tierlog.client import LATEST, LogClient
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.records.reader import iter_batches_records
from tierlog.remote import manifest as mf
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.remote_log_manager import RemoteLogManager


def test_read_committed_returns_exactly_the_committed_records_of_remote_segments(
    spark: Any,
    s3_bucket: S3Bucket,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = LogConfig.from_props({"segment.bytes": 2048, "remote.storage.enable": True})
    log = Log(tmp_path / "data" / f"{TOPIC}-{PARTITION}", config)
    store = FsspecRemoteStore(s3_bucket.url, s3_bucket.options(), retries=0)
    manager = RemoteLogManager(store, tmp_path / "cache", 0)
    try:
        written = append_transactions(log)
        assert written.aborted_offsets and written.committed != written.all_values
        log.roll()  # every marker in a closed segment: the whole log goes remote
        manager.track(TOPIC, PARTITION, TOPIC_ID, log, lambda: 0, lambda: log.log_end_offset)
        asyncio.run(manager.run_cycle())
        committed = mf.committed_segments(store.read_manifest(TOPIC, PARTITION))
        assert committed[-1].next_offset == log.log_end_offset
        assert sum(s.has_txn_index for s in committed) >= 3
    finally:
        manager.close()
        log.close()
    options = {
        "subscribe": TOPIC,
        "tierlog.tiers": "remote",
        "remote.log.storage.url": s3_bucket.url,
        "remote.log.storage.options.endpoint_url": s3_bucket.endpoint_url,
        "remote.log.storage.options.key": "testing",
        "remote.log.storage.options.secret": "testing",
        "remote.log.storage.options.client_kwargs.region_name": "us-east-1",
    }

    def rows(**extra: str) -> list[tuple[int, bytes]]:
        df = spark.read.format("tierlog").options(**options, **extra).load()
        return sorted((r["offset"], bytes(r["value"])) for r in df.collect())

    assert rows(**{"kafka.isolation.level": "read_committed"}) == written.committed
    assert rows() == written.all_values


@pytest.mark.timeout(300)  # a broker, three offload waits, two reads and three stream runs
def test_remote_only_read_committed_stops_before_transactions_whose_marker_is_local(
    spark: Any, tmp_path: Path
) -> None:
    """With ``tierlog.tiers=remote`` there is no broker to ask for the LSO. A transaction
    whose records are offloaded while its marker is still in the local active segment is
    not known committed or aborted from the remote tier: batch and streaming reads stop
    before it (the remote tier's own LSO) until its marker is remote too; then an aborted
    one is dropped and a committed one appears, each exactly once."""
    broker = start_broker(tmp_path / "data", **{"transaction.state.log.num.partitions": "2"})
    topic = "remote-txns"
    try:
        create_tiered_topic(broker.bootstrap, topic, 1)
        tiered = TieredTopic(broker, topic, 1, 0)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "remote-lso",
             "linger.ms": 5, "batch.num.messages": 50, "log_level": 4}
        )  # fmt: skip
        # Batches well under segment.bytes (a bigger one is refused).
        plain = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.num.messages": 50}
        )
        failed: list[str] = []

        def send_plain(value: bytes) -> None:
            plain.produce(topic, value=value, on_delivery=lambda e, _: e and failed.append(str(e)))

        producer.init_transactions(15)

        def transaction(tag: str, n: int, *, commit: bool, beside: str = "") -> None:
            producer.begin_transaction()
            for i in range(n):
                producer.produce(topic, value=b"%s-%d-%s" % (tag.encode(), i, b"x" * 40))
                if i == 0:
                    producer.flush(15)  # the transaction begins before any plain record
                elif beside and i % 10 == 0:  # plain records among the transaction's
                    send_plain(b"%s-%d" % (beside.encode(), i))
            assert plain.flush(15) == 0 and not failed, failed
            producer.flush(15)  # sent first: an abort purges what is still queued
            if commit:
                producer.commit_transaction(15)
            else:
                producer.abort_transaction(15)

        options = {
            "subscribe": topic,
            "tierlog.tiers": "remote",
            "remote.log.storage.url": tiered.remote_url,
            "kafka.isolation.level": "read_committed",
        }
        stream = spark.readStream.format("tierlog").options(**options, startingOffsets="earliest")
        out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

        def read() -> list[bytes]:
            df = spark.read.format("tierlog").options(**options).load()
            return [bytes(r["value"]) for r in sorted(df.collect(), key=lambda r: r["offset"])]

        def run_stream() -> list[bytes]:
            rows = run_available_now(spark, stream, out, checkpoint).collect()
            offsets = [r["offset"] for r in rows]
            assert len(offsets) == len(set(offsets)), "no row twice"
            return [bytes(r["value"]) for r in sorted(rows, key=lambda r: r["offset"])]

        # Committed and remote with its marker; then A, aborted, its ABORT marker local.
        transaction("c0", 40, commit=True)
        transaction("a", 250, commit=False, beside="p1")
        remote_end = wait_settled(tiered)
        log = records(broker.bootstrap, topic)
        c0, a, p1 = (values(log, tag) for tag in ("c0-", "a-", "p1-"))
        first_a = offset_of(log, b"a-0-")
        a_marker = log_end(broker.bootstrap, topic) - 1
        assert first_a < remote_end <= a_marker, "A's records are remote, its marker is not"
        assert read() == c0  # not A's records (aborted), nor p1's (above the remote LSO)
        assert run_stream() == c0

        # B, committed, its COMMIT marker local; A's marker is remote now.
        transaction("b", 250, commit=True)
        remote_end = wait_settled(tiered, past=a_marker)
        log = records(broker.bootstrap, topic)
        b = values(log, "b-")
        assert offset_of(log, b"b-0-") < remote_end <= log_end(broker.bootstrap, topic) - 1
        assert read() == c0 + p1  # A dropped by its remote .txnindex entry; B not yet known
        assert run_stream() == c0 + p1

        # B's marker goes remote behind plain records: B is read, once.
        b_marker = log_end(broker.bootstrap, topic) - 1
        for i in range(150):
            send_plain(b"p2-%d-%s" % (i, b"y" * 40))
        assert plain.flush(15) == 0 and not failed, failed
        remote_end = wait_settled(tiered, past=b_marker)
        log = records(broker.bootstrap, topic)
        p2 = [v for o, v in log if v.startswith(b"p2-") and o < remote_end]
        assert p2, "some of the plain records after B are remote"
        streamed = run_stream()
        assert streamed == c0 + p1 + b + p2
        assert a and not set(a) & set(streamed), "never an aborted record"
    finally:
        broker.stop()


def wait_settled(tiered: TieredTopic, *, past: int = -1, timeout: float = 60) -> int:
    """Until every closed segment is remote (the remote end is the local active segment's
    base) and the remote end is past ``past``; returns the remote end."""
    directory = tiered.broker.data_dir / f"{tiered.topic}-0"
    deadline = time.monotonic() + timeout
    while True:
        end = mf.end_offset(tiered.store().read_manifest(tiered.topic, 0))
        active = max(int(p.stem) for p in directory.glob("*.log"))
        if end == active and end > past:
            return end
        assert time.monotonic() < deadline, f"remote end {end}, active segment at {active}"
        time.sleep(0.2)


def records(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    """Every data record of partition 0 (read_uncommitted through the broker, which serves
    the offloaded part from the remote tier), by offset; markers are not records."""
    end = log_end(bootstrap, topic)
    out: list[tuple[int, bytes]] = []
    with LogClient(bootstrap) as client:
        offset = 0
        while offset < end:
            batches = list(iter_batches_records(client.fetch(topic, 0, offset).records))
            assert batches, f"nothing at offset {offset}"
            for header, recs in batches:
                if not header.is_control:
                    out += [(r.offset, r.value or b"") for r in recs]
                offset = header.next_offset
    return out


def values(log: list[tuple[int, bytes]], tag: str) -> list[bytes]:
    return [v for _, v in log if v.startswith(tag.encode())]


def offset_of(log: list[tuple[int, bytes]], prefix: bytes) -> int:
    return next(o for o, v in log if v.startswith(prefix))


def log_end(bootstrap: str, topic: str) -> int:
    with LogClient(bootstrap) as client:
        return client.list_offsets({(topic, 0): LATEST})[topic, 0]
