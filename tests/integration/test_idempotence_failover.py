"""Idempotent deduplication survives a leader change (issue 9: "idempotent-producer state is
rebuilt on followers"; KIP-98).

Batches with a producer id, epoch and sequence go raw to the leader with acks=all; the
leader is killed (SIGKILL: its successor knows the producer only from what it replicated);
the very same batches, byte for byte, are then retried on the new leader. As in Kafka
(``ProducerStateEntry.findDuplicateBatch`` over the last five batches of a producer), each
retry is answered with no error and the offset it was first written at, and the log holds
it once; the producer's next sequence goes on where it left off, and a gap is refused.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.integration.cluster_harness import ProcessCluster
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.records.builder import Record, build_batch

TOPIC = "dedup"
RECORDS_PER_BATCH = 2
# Answers a client retries on another broker after a metadata refresh.
RETRIABLE = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.not_enough_replicas,
    ErrorCode.request_timed_out,
}


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, zk_connect, 3).start()
    try:
        admin = c.admin()
        topic = NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([topic])[TOPIC].result(30)
        c.wait_for_full_isr(TOPIC, 1, 3)
        yield c
    finally:
        c.kill()


def batch(pid: int, epoch: int, seq: int) -> bytes:
    """``RECORDS_PER_BATCH`` records valued ``v<sequence>``, as an idempotent producer
    sends them (base offset 0, no leader epoch: the leader stamps both)."""
    return build_batch(
        [Record(None, b"v%d" % (seq + i)) for i in range(RECORDS_PER_BATCH)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def produce(client: RawClient, records: bytes) -> Any:
    answer = client.call(
        request(
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": 10_000,
                "topic_data": [
                    {"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}
                ],
            },
        )
    )
    return answer.responses[0].partition_responses[0]


def produce_on_leader(cluster: ProcessCluster, records: bytes, timeout: float = 30) -> Any:
    """Send ``records`` to whoever leads now, retrying retriable answers as a client would."""
    deadline = time.monotonic() + timeout
    while True:
        leader = cluster.leader_of(TOPIC, 0)
        if leader >= 0:
            client = RawClient(cluster.brokers[leader].port)
            try:
                answer = produce(client, records)
            finally:
                client.close()
            if ErrorCode(int(answer.error_code)) not in RETRIABLE:
                return answer
        assert time.monotonic() < deadline, "no leader took the produce"
        time.sleep(0.2)


def init_producer_id(cluster: ProcessCluster) -> tuple[int, int]:
    client = RawClient(cluster.brokers[0].port)
    try:
        answer = client.call(
            request(
                ApiKey.INIT_PRODUCER_ID,
                4,
                {"transactional_id": None, "transaction_timeout": 60_000},
            )
        )
    finally:
        client.close()
    assert int(answer.error_code) == 0, answer
    return int(answer.producer_id), int(answer.producer_epoch)


def read_values(cluster: ProcessCluster) -> list[bytes]:
    """The partition's records from offset 0 to the high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "dedup", "enable.auto.commit": False}
    )
    values: list[bytes] = []
    try:
        end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 30
        while len(values) < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                assert msg.offset() == len(values)
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_a_retried_batch_is_deduplicated_by_the_new_leader(cluster: ProcessCluster) -> None:
    pid, epoch = init_producer_id(cluster)
    sent = [batch(pid, epoch, seq) for seq in range(0, 3 * RECORDS_PER_BATCH, RECORDS_PER_BATCH)]
    first = []
    for records in sent:
        answer = produce_on_leader(cluster, records)
        assert int(answer.error_code) == 0, answer
        first.append(int(answer.base_offset))
    assert first == [0, 2, 4]

    old_leader = cluster.leader_of(TOPIC, 0)
    cluster.brokers[old_leader].kill()
    cluster.wait_until(
        lambda: cluster.leader_of(TOPIC, 0) not in (-1, old_leader), "a new leader", 30
    )

    # The last batch (the usual retry: its answer was lost), then the first one (Kafka
    # remembers a producer's last five batches).
    for index in (2, 0):
        answer = produce_on_leader(cluster, sent[index])
        assert (int(answer.error_code), int(answer.base_offset)) == (0, first[index]), answer
    following = produce_on_leader(cluster, batch(pid, epoch, 3 * RECORDS_PER_BATCH))
    assert (int(following.error_code), int(following.base_offset)) == (0, 6), following
    gap = produce_on_leader(cluster, batch(pid, epoch, 4 * RECORDS_PER_BATCH + 1))
    assert ErrorCode(int(gap.error_code)) == ErrorCode.out_of_order_sequence_number, gap

    assert read_values(cluster) == [b"v%d" % n for n in range(4 * RECORDS_PER_BATCH)]
