"""KIP-890 part 1 on the wire: a transactional produce into a partition its transaction
never added is refused (INVALID_TXN_STATE) and writes nothing, so it cannot open a
transaction that no marker would close (a "hanging" one holding the LSO forever); the same
produce after AddPartitionsToTxn is accepted. Transactional batches without a
transactional id are refused outright, as in Kafka."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker.harness import BrokerProcess
from tests.broker.test_transactions import TXN_OVERRIDES, create_topic, last_stable_offset
from tests.raw_client import RawClient, request
from tierlog.protocol import ApiKey
from tierlog.records.builder import Record, build_batch

TXN_ID = "raw-writer"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[BrokerProcess, RawClient]]:
    broker = BrokerProcess(tmp_path / "data", TXN_OVERRIDES).start()
    raw = RawClient(broker.port)
    try:
        yield broker, raw
    finally:
        raw.close()
        broker.stop()


def init_producer(raw: RawClient) -> tuple[int, int]:
    deadline = time.monotonic() + 15
    while True:
        found = raw.call(request(ApiKey.FIND_COORDINATOR, 3, {"key": TXN_ID, "key_type": 1}))
        if int(found.error_code) == 0:
            break
        assert time.monotonic() < deadline, found
        time.sleep(0.1)
    while True:
        answer = raw.call(
            request(
                ApiKey.INIT_PRODUCER_ID,
                5,
                {"transactional_id": TXN_ID, "transaction_timeout": 60_000},
            )
        )
        if int(answer.error_code) == 0:
            return int(answer.producer_id), int(answer.producer_epoch)
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)


def produce(raw: RawClient, transactional_id: str | None, pid: int, epoch: int, seq: int) -> Any:
    batch = build_batch(
        [Record(b"k", b"v%d" % seq)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    answer = raw.call(
        request(
            ApiKey.PRODUCE,
            9,
            {
                "transactional_id": transactional_id,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {"name": "hang", "partition_data": [{"index": 0, "records": batch}]}
                ],
            },
        )
    )
    return answer.responses[0].partition_responses[0]


def test_a_produce_outside_the_transaction_is_refused_and_writes_nothing(client) -> None:
    broker, raw = client
    create_topic(broker.bootstrap, "hang")
    pid, epoch = init_producer(raw)
    refused = produce(raw, TXN_ID, pid, epoch, 0)
    assert int(refused.error_code) == 48  # INVALID_TXN_STATE
    assert last_stable_offset(broker.bootstrap, "hang") == 0
    added = raw.call(
        request(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            {
                "v3_and_below_transactional_id": TXN_ID,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": "hang", "partitions": [0]}],
            },
        )
    )
    codes = [
        int(p.partition_error_code)
        for t in added.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]
    assert codes == [0]
    accepted = produce(raw, TXN_ID, pid, epoch, 0)
    assert (int(accepted.error_code), int(accepted.base_offset)) == (0, 0)
    assert last_stable_offset(broker.bootstrap, "hang") == 0  # open: held at its start
    ended = raw.call(
        request(
            ApiKey.END_TXN,
            3,
            {
                "transactional_id": TXN_ID,
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": False,
            },
        )
    )
    assert int(ended.error_code) == 0
    deadline = time.monotonic() + 10
    while last_stable_offset(broker.bootstrap, "hang") != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert last_stable_offset(broker.bootstrap, "hang") == 2  # record + ABORT marker
    # After the end, the same producer's late batch is refused again: no new transaction.
    late = produce(raw, TXN_ID, pid, epoch, 1)
    assert int(late.error_code) == 48
    assert last_stable_offset(broker.bootstrap, "hang") == 2


def test_transactional_batches_need_a_transactional_id(client) -> None:
    broker, raw = client
    create_topic(broker.bootstrap, "hang")
    answer = produce(raw, None, 5, 0, 0)
    assert int(answer.error_code) == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert last_stable_offset(broker.bootstrap, "hang") == 0
