"""Offsets sent in a transaction (TxnOffsetCommit) are the group's committed offsets by the
time EndTxn answers (txn/coordinator.py writes the __consumer_offsets markers first): a
client that does not ask OffsetFetch for stable offsets (aiokafka, KIP-447's
``require_stable`` unset) reads them right after ``commit``, as it would from Kafka once the
markers land. Before, aiokafka read the previous offsets for a while after most commits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tierlog.broker.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)


async def commit_and_read(bootstrap: str, rounds: int) -> list[tuple[int, int | None]]:
    """(offset sent in the transaction, what committed() read right after) per round."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="copier")
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="copy-group")
    await producer.start()
    await consumer.start()
    source = TopicPartition("source", 0)
    reads: list[tuple[int, int | None]] = []
    try:
        for i in range(1, rounds + 1):
            async with producer.transaction():
                await producer.send_and_wait("copies", b"record %d" % i)
                await producer.send_offsets_to_transaction({source: 10 * i}, "copy-group")
            reads.append((10 * i, await consumer.committed(source)))
        # An aborted transaction's offsets never show.
        await producer.begin_transaction()
        await producer.send_offsets_to_transaction({source: 99_999}, "copy-group")
        await producer.abort_transaction()
        reads.append((10 * rounds, await consumer.committed(source)))
    finally:
        await producer.stop()
        await consumer.stop()
    return reads


def test_committed_right_after_commit_shows_the_transactions_offsets(tmp_path: Path) -> None:
    with EmbeddedBroker(
        {"log.dirs": str(tmp_path), "num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}
    ) as broker:
        reads = asyncio.run(commit_and_read(broker.bootstrap, 30))
    stale = [(sent, read) for sent, read in reads if read != sent]
    assert stale == [], f"{len(stale)} of {len(reads)} reads were stale: {stale[:5]}"
