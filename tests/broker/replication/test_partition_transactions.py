"""Partition and UnifiedLog: the last stable offset, markers and read_committed reads."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.local.conftest import T0, make_batch
from tierlog.broker.coordination.api import PartitionState
from tierlog.broker.errors import error_code
from tierlog.broker.replication.partition import (
    NOT_LEADER_OR_FOLLOWER,
    Partition,
    PartitionError,
    ReadResult,
)
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.local.producer_state import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from tierlog.records.builder import Record, build_batch
from tierlog.records.header import iter_batches
from tierlog.records.txn_index_codec import AbortedTxn
from tierlog.remote.unified_log import UnifiedLog, records_end_offset
from tierlog.util.clock import ManualClock

ME = 1


def txn_batch(pid: int, seq: int = 0, n: int = 1) -> bytes:
    return build_batch(
        [Record(b"k", b"v", timestamp=T0) for _ in range(n)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=True,
    )


def make_partition(tmp_path: Path, state: PartitionState) -> Partition:
    # Markers are stamped with the clock: T0, as the batches, so no roll by time.
    log = Log(tmp_path / "t-0", LogConfig(), clock=ManualClock(T0))
    return Partition("t", uuid.uuid4(), 0, UnifiedLog(log, None, "t", 0), state, ME)


def read(p: Partition, offset: int, *, committed: bool, max_bytes: int = 1 << 20) -> ReadResult:
    return asyncio.run(p.read(offset, max_bytes, read_committed=committed, min_one_batch=True))


def offsets_of(records: object) -> list[int]:
    if records is None:
        return []
    data = records if isinstance(records, bytes) else records.read()  # type: ignore[attr-defined]
    return [h.base_offset for _, h in iter_batches(data)]


def test_read_committed_stops_at_the_lso_and_lists_aborts(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME]))
    p.append(make_batch(1), acks=1, min_insync_replicas=1)  # 0
    p.append(txn_batch(7, n=2), acks=1, min_insync_replicas=1)  # 1-2
    p.append(make_batch(1), acks=1, min_insync_replicas=1)  # 3
    assert p.high_watermark == 4
    assert p.last_stable_offset == 1
    committed = read(p, 0, committed=True)
    assert offsets_of(committed.records) == [0]
    assert committed.last_stable_offset == 1
    assert committed.aborted_transactions == []
    uncommitted = read(p, 0, committed=False)
    assert offsets_of(uncommitted.records) == [0, 1, 3]
    assert uncommitted.aborted_transactions is None
    # Nothing readable at the LSO: an empty answer with an empty list.
    empty = read(p, 1, committed=True)
    assert empty.records is None and empty.aborted_transactions == []

    info = p.append_marker(7, 0, 0, commit=False)  # 4
    assert info.first_offset == 4
    assert p.high_watermark == p.last_stable_offset == 5
    after = read(p, 0, committed=True)
    assert offsets_of(after.records) == [0, 1, 3, 4]
    assert after.aborted_transactions == [AbortedTxn(7, 1, 4, 5)]
    # A fetch ending before the transaction began is not told about it.
    first_only = read(p, 0, committed=True, max_bytes=1)
    assert offsets_of(first_only.records) == [0]
    assert first_only.aborted_transactions == []


def test_lso_is_bounded_by_the_high_watermark(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME, 2]))
    p.append(make_batch(2), acks=1, min_insync_replicas=1)
    p.append(txn_batch(7), acks=1, min_insync_replicas=1)  # 2, open
    assert p.high_watermark == 0  # the follower has fetched nothing
    assert p.last_stable_offset == 0
    p.fetch_for_follower(2, 3, 1 << 20, 0)  # the follower has everything
    assert p.high_watermark == 3
    assert p.last_stable_offset == 2


def test_markers_need_the_leader_and_current_epochs(tmp_path: Path) -> None:
    follower = make_partition(tmp_path / "f", PartitionState(2, 0, [2, ME]))
    with pytest.raises(PartitionError) as caught:
        follower.append_marker(7, 0, 0, commit=True)
    assert caught.value.code == NOT_LEADER_OR_FOLLOWER
    p = make_partition(tmp_path, PartitionState(ME, 3, [ME]))
    p.append(
        build_batch(
            [Record(b"k", b"v", timestamp=T0)],
            producer_id=7,
            producer_epoch=2,
            base_sequence=0,
            transactional=True,
        ),
        acks=1,
        min_insync_replicas=1,
    )
    with pytest.raises(InvalidProducerEpochError) as stale:
        p.append_marker(7, 1, 0, commit=True)
    assert error_code(stale.value) == 47
    info = p.append_marker(7, 2, 4, commit=True)
    assert info.batches[0].partition_leader_epoch == 3
    with pytest.raises(TransactionCoordinatorFencedError) as fenced:
        p.append_marker(7, 2, 3, commit=False)
    assert error_code(fenced.value) == 52
    assert error_code(InvalidTxnStateError("x", 7)) == 48


def test_coordinator_appends_pass_through(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME]))
    offsets_commit = build_batch(
        [Record(b"g", b"o", timestamp=T0)],
        producer_id=9,
        producer_epoch=0,
        base_sequence=-1,
        transactional=True,
    )
    info = p.append(offsets_commit, acks=1, min_insync_replicas=1, coordinator=True)
    assert info.first_offset == 0
    assert p.last_stable_offset == 0


class FakeRemote:
    def __init__(self, txns: list[AbortedTxn]) -> None:
        self.txns = txns
        self.calls: list[tuple[str, int, int, int]] = []

    async def aborted_transactions(
        self, topic: str, partition: int, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        self.calls.append((topic, partition, fetch_offset, upper_bound_offset))
        return self.txns


def test_unified_log_merges_remote_and_local_aborts(tmp_path: Path) -> None:
    shared = AbortedTxn(3, 8, 12, 13)
    remote = FakeRemote([AbortedTxn(1, 2, 5, 6), shared])
    local = Log(tmp_path / "t-0", LogConfig())
    local.truncate_fully_and_start_at(10)
    local.append(txn_batch(4))  # 10
    local.append_marker(4, 0, 0, commit=False, leader_epoch=0)  # 11
    local.active_segment.txn_index.append(shared._replace(last_offset=12))
    unified = UnifiedLog(local, remote, "t", 0)  # type: ignore[arg-type]
    found = asyncio.run(unified.collect_aborted_transactions(0, 20))
    assert found == [AbortedTxn(1, 2, 5, 6), shared, AbortedTxn(4, 10, 11, 12)]
    assert remote.calls == [("t", 0, 0, 20)]
    # A range starting in the local tier does not ask the remote one.
    assert asyncio.run(unified.collect_aborted_transactions(10, 20)) == [
        shared,
        AbortedTxn(4, 10, 11, 12),
    ]
    assert len(remote.calls) == 1
    local.close()


def test_records_end_offset() -> None:
    first = make_batch(2)
    second = bytearray(make_batch(3))
    second[0:8] = (2).to_bytes(8, "big")
    data = first + bytes(second)
    assert records_end_offset(data) == 5
    assert records_end_offset(data[: len(first) + 70]) == 5  # a cut batch counts whole
    assert records_end_offset(data[: len(first) + 10]) == 2
    assert records_end_offset(None) is None
    assert records_end_offset(b"") is None


def test_a_marker_above_the_high_watermark_still_holds_the_lso(tmp_path: Path) -> None:
    """Kafka's unreplicatedTxns: until the ISR has the marker, a new leader might not."""
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME, 2]))
    p.append(txn_batch(7, n=2), acks=1, min_insync_replicas=1)  # 0-1
    p.append(make_batch(1), acks=1, min_insync_replicas=1)  # 2
    p.fetch_for_follower(2, 3, 1 << 20, 0)
    assert (p.high_watermark, p.last_stable_offset) == (3, 0)
    p.append_marker(7, 0, 0, commit=True)  # 3
    assert p.local.first_unstable_offset is None
    assert p.last_stable_offset == 0  # the follower does not have the marker yet
    p.fetch_for_follower(2, 4, 1 << 20, 0)
    assert p.high_watermark == p.last_stable_offset == 4


FOLLOWER = 2


def make_follower(tmp_path: Path) -> Partition:
    log = Log(tmp_path / "f" / "t-0", LogConfig(), clock=ManualClock(T0))
    state = PartitionState(ME, 0, [ME, FOLLOWER])
    return Partition("t", uuid.uuid4(), 0, UnifiedLog(log, None, "t", 0), state, FOLLOWER)


def replicate(leader: Partition, follower: Partition) -> None:
    """One fetch of the follower from the leader, as the replica fetcher does it."""
    result = leader.fetch_for_follower(FOLLOWER, follower.local.log_end_offset, 1 << 20, 0)
    records = result.records
    if records is not None:
        data = records if isinstance(records, bytes) else records.read()
        follower.append_as_follower(data)
    follower.update_follower_high_watermark(result.high_watermark)


def test_a_follower_holds_its_lso_until_the_marker_is_below_its_high_watermark(
    tmp_path: Path,
) -> None:
    """Kafka keeps unreplicatedTxns on every replica: a follower serving read_committed
    consumers (KIP-392) must not show a transaction whose marker a new leader may lack."""
    leader = make_partition(tmp_path, PartitionState(ME, 0, [ME, FOLLOWER]))
    follower = make_follower(tmp_path)
    leader.append(txn_batch(7, n=2), acks=1, min_insync_replicas=1)  # 0-1
    leader.append(make_batch(1), acks=1, min_insync_replicas=1)  # 2
    replicate(leader, follower)
    replicate(leader, follower)
    assert (follower.high_watermark, follower.last_stable_offset) == (3, 0)  # open
    leader.append_marker(7, 0, 0, commit=True)  # 3
    replicate(leader, follower)  # the marker arrives; the high watermark is still 3
    assert (follower.local.log_end_offset, follower.high_watermark) == (4, 3)
    assert follower.local.first_unstable_offset is None
    assert follower.last_stable_offset == 0
    assert read(follower, 0, committed=True).records is None  # nothing of it yet
    replicate(leader, follower)  # the high watermark passes the marker
    assert follower.high_watermark == follower.last_stable_offset == 4
    assert offsets_of(read(follower, 0, committed=True).records) == [0, 2, 3]


def test_a_follower_lso_does_not_go_back_when_a_marker_is_truncated(tmp_path: Path) -> None:
    leader = make_partition(tmp_path, PartitionState(ME, 0, [ME, FOLLOWER]))
    follower = make_follower(tmp_path)
    leader.append(make_batch(1), acks=1, min_insync_replicas=1)  # 0
    leader.append(txn_batch(7, n=2), acks=1, min_insync_replicas=1)  # 1-2
    replicate(leader, follower)
    replicate(leader, follower)
    leader.append_marker(7, 0, 0, commit=True)  # 3
    replicate(leader, follower)
    seen = [follower.last_stable_offset]
    # The leader dies before the marker is committed; the new one lacks it, and this
    # follower truncates to where they diverge: the transaction is open again.
    follower.truncate_to(3)
    seen.append(follower.last_stable_offset)
    assert follower.local.first_unstable_offset == 1
    assert seen == [1, 1]


def test_a_leader_becoming_follower_keeps_holding_its_lso(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME, FOLLOWER]))
    p.append(txn_batch(7, n=2), acks=1, min_insync_replicas=1)  # 0-1
    p.fetch_for_follower(FOLLOWER, 2, 1 << 20, 0)
    p.append_marker(7, 0, 0, commit=True)  # 2, not yet on the follower
    assert (p.high_watermark, p.last_stable_offset) == (2, 0)
    assert p.make_follower(PartitionState(FOLLOWER, 1, [FOLLOWER, ME]), [ME, FOLLOWER])
    assert p.last_stable_offset == 0
    p.update_follower_high_watermark(3)
    assert p.last_stable_offset == 3
