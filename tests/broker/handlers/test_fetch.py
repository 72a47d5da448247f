"""Fetch handler: what a fetch answer says about transactions (aborted list, LSO)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.broker.replication.test_partition_transactions import ME, make_partition, txn_batch
from tierlog.broker.coordination.api import PartitionState
from tierlog.broker.handlers.fetch import (
    PartitionRead,
    _read_all,
    _Wanted,
    consumer_read,
    follower_read,
)
from tierlog.broker.replication.partition import Partition
from tierlog.protocol import AbortedTransaction, FetchPartitionData


def _fetched(p: Partition, reader: PartitionRead, offset: int = 0) -> FetchPartitionData:
    answer = FetchPartitionData(partition_index=0)
    wanted = _Wanted(answer, p, offset, 1 << 20, -1)
    asyncio.run(_read_all([wanted], 1 << 20, reader, follower=False))
    return answer


def test_fetch_answers_aborted_transactions_to_read_committed_consumers(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME, 2]))
    p.fetch_for_follower(2, 0, 1 << 20, 0)
    p.append(txn_batch(7, n=2), acks=1, min_insync_replicas=1)  # 0-1
    p.append_marker(7, 0, 0, commit=False)  # 2
    p.append(txn_batch(8), acks=1, min_insync_replicas=1)  # 3, open
    p.fetch_for_follower(2, 4, 1 << 20, 0)
    assert (p.high_watermark, p.last_stable_offset) == (4, 3)
    committed = _fetched(p, consumer_read(True))
    assert committed.error_code == 0
    assert committed.last_stable_offset == 3 and committed.high_watermark == 4
    assert committed.aborted_transactions == [AbortedTransaction(7, 0)]
    none_yet = _fetched(p, consumer_read(True), offset=3)
    assert none_yet.aborted_transactions == []
    uncommitted = _fetched(p, consumer_read(False))
    assert uncommitted.aborted_transactions is None
    assert uncommitted.last_stable_offset == 3
    follower = _fetched(p, follower_read(2), offset=4)
    assert follower.aborted_transactions is None
