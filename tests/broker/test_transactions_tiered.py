"""read_committed across the tier boundary: after a transactional topic's closed segments
are offloaded and deleted locally, a replay from offset 0 is exactly its committed records
(the remote segments' uploaded .txnindex tells the consumer which records were aborted)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.harness import BrokerProcess
from tests.broker.test_tiered import FAST, manifest, wait_for_offload
from tests.broker.test_transactions import TXN_OVERRIDES, read_values, transactional_producer

TOPIC = "ledger"


def test_a_replay_from_0_after_offload_is_exactly_the_committed_records(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {**FAST, **TXN_OVERRIDES}).start()
    try:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics(
            [
                NewTopic(
                    TOPIC,
                    1,
                    1,
                    config={
                        "remote.storage.enable": "true",
                        "local.retention.bytes": "40000",
                        "retention.ms": "-1",
                    },
                )
            ]
        )[TOPIC].result(timeout=10)
        producer = transactional_producer(bootstrap, "ledger-writer", **{"batch.num.messages": 20})
        committed: list[bytes] = []
        everything: list[bytes] = []
        # Small transactions, and every 7th one larger than a 16 KiB segment, so aborted
        # ranges cross segment (and so tier) boundaries; every third one aborts.
        for n in range(36):
            size = 200 if n % 7 == 3 else 25
            batch = [b"%03d-%04d-" % (n, i) + b"x" * 100 for i in range(size)]
            producer.begin_transaction()
            for value in batch:
                producer.produce(TOPIC, value, partition=0)
            producer.flush(10)
            if n % 3 == 1:
                producer.abort_transaction(15)
            else:
                producer.commit_transaction(15)
                committed += batch
            everything += batch
        data = tmp_path / "data"
        wait_for_offload(data, TOPIC)
        remote = [s for s in manifest(data, TOPIC)["segments"] if s["state"] == "COPY_FINISHED"]
        # Its part inside the segment's one object (issue 24).
        assert any("txn_index" in s["parts"] for s in remote), "no remote segment has a txn index"
        first_local = min(int(p.stem) for p in (data / f"{TOPIC}-0").glob("*.log"))
        assert first_local > 0, "nothing was deleted locally: the replay would not cross tiers"
        assert read_values(bootstrap, TOPIC, 1, "read_committed", settle_s=3) == committed
        assert read_values(bootstrap, TOPIC, 1, "read_uncommitted", settle_s=3) == everything
    finally:
        broker.stop()
