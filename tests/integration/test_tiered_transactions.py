"""Transactions on a tiered topic end to end: a real broker offloading to file://, a
transactional confluent-kafka producer, and the Spark source reading with
``kafka.isolation.level=read_committed`` across both tiers (KIP-98 with KIP-405)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.broker.test_transactions import read_values
from tests.integration.broker_metrics import REMOTE_CYCLES, wait_for_more
from tests.tiered_data import TieredTopic, create_tiered_topic, start_broker, wait_offloaded
from tierlog.remote import manifest as mf


@pytest.mark.timeout(300)  # a broker, transactions and two Spark reads: ~1.5 min
def test_read_committed_across_both_tiers_of_a_brokers_topic(spark: Any, tmp_path: Path) -> None:
    """A transactional producer against a broker offloading to file://: committed and
    aborted transactions, then one left open. Offload stops below the open transaction
    (the LSO), and a read_committed read across the remote and local tiers returns the
    committed records only, ending at the LSO."""
    broker = start_broker(tmp_path / "data", **{"transaction.state.log.num.partitions": "2"})
    topic = "txns"
    try:
        create_tiered_topic(broker.bootstrap, topic, 1)
        # The open transaction below lives through two Spark reads: on a loaded machine
        # they passed librdkafka's default 60 s transaction.timeout.ms, and the
        # coordinator aborted it (fencing the producer) before the test did.
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "spark-txn",
             "linger.ms": 5, "batch.num.messages": 50, "log_level": 4,
             "transaction.timeout.ms": 300_000}
        )  # fmt: skip
        producer.init_transactions(15)
        committed: list[bytes] = []
        for n in range(18):
            producer.begin_transaction()
            values = [b"t%d-%d-%s" % (n, i, b"x" * 40) for i in range(40)]
            for value in values:
                producer.produce(topic, value=value, partition=0)
            if n % 3 == 1:
                producer.flush(15)  # sent first: an abort purges what is still queued
                producer.abort_transaction(15)
            else:
                producer.commit_transaction(15)
                committed += values
        tiered = TieredTopic(broker, topic, 1, 0)
        wait_offloaded(tiered)
        # A transaction left open over a few segments: nothing from its first offset on
        # may be offloaded, however many segments close.
        store = tiered.store()
        open_from = mf.end_offset(store.read_manifest(topic, 0))
        producer.begin_transaction()
        for i in range(250):
            producer.produce(topic, value=b"open-%d-%s" % (i, b"y" * 40), partition=0)
        producer.flush(15)
        # Offload had every chance: several whole remote cycles ran after the open
        # transaction's records were in (a cycle offloads whatever closed segment is due).
        wait_for_more(broker.metrics_port(), REMOTE_CYCLES, 3)
        local = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
        assert len(local) >= 3, "the open transaction spans closed segments"
        remote_end = mf.end_offset(store.read_manifest(topic, 0))
        assert remote_end <= first_offset_of_open(broker.bootstrap, topic, open_from)
        remote = mf.committed_segments(store.read_manifest(topic, 0))
        assert any(s.has_txn_index for s in remote), "aborted transactions' indexes offloaded"

        options = {
            "kafka.bootstrap.servers": broker.bootstrap,
            "subscribe": topic,
            "remote.log.storage.url": tiered.remote_url,
            "kafka.isolation.level": "read_committed",
            "tierlog.includeTier": "true",
        }

        def rows() -> list[tuple[int, bytes, str]]:
            df = spark.read.format("tierlog").options(**options).load()
            return sorted((r["offset"], bytes(r["value"]), r["tier"]) for r in df.collect())

        # Everything committed is remote; the read ends at the LSO (the open transaction).
        first = rows()
        assert [v for _, v, _ in first] == committed
        assert {t for _, _, t in first} == {"remote"}
        # A Kafka consumer reads the offloaded part through the broker, which answers its
        # read_committed fetches with the remote .txnindex objects' aborts.
        assert local_start(broker.data_dir / f"{topic}-0") > 0, "some offsets are remote-only"
        assert read_values(broker.bootstrap, topic, 1, "read_committed") == committed
        # The open transaction is aborted (its marker, and so its .txnindex entry, in the
        # active segment) and one more is committed after it: its segments go remote now,
        # and a remote read of them learns of the abort from the leader; the last
        # transaction is read from the leader.
        producer.abort_transaction(15)
        producer.begin_transaction()
        final = [b"final-%d" % i for i in range(10)]
        for value in final:
            producer.produce(topic, value=value, partition=0)
        producer.commit_transaction(15)
        deadline = time.monotonic() + 20
        while mf.end_offset(store.read_manifest(topic, 0)) <= remote_end:
            assert time.monotonic() < deadline, "the aborted transaction's segments go remote"
            time.sleep(0.2)
        second = rows()
        assert [v for _, v, _ in second] == committed + final
        assert {t for _, _, t in second} == {"remote", "local"}
    finally:
        broker.stop()


def first_offset_of_open(bootstrap: str, topic: str, start: int) -> int:
    """The first offset of an "open-" record at or after ``start`` (read_uncommitted)."""
    from tierlog.client import LogClient
    from tierlog.records.reader import iter_batches_records

    with LogClient(bootstrap) as client:
        offset = start
        while True:
            result = client.fetch(topic, 0, offset)
            batches = list(iter_batches_records(result.records))
            assert batches, "no open record found"
            for header, records in batches:
                for record in records:
                    if record.offset >= start and (record.value or b"").startswith(b"open-"):
                        return record.offset
                offset = header.next_offset


def local_start(directory: Path) -> int:
    return min(int(p.stem) for p in directory.glob("*.log"))
