"""Partition: the replication state (leadership, ISR, high watermark) above the log."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.local.conftest import make_batch
from tierlog.broker.coordination.api import PartitionState
from tierlog.broker.replication.partition import (
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    Partition,
    PartitionError,
)
from tierlog.local.config import LogConfig
from tierlog.local.log import Log
from tierlog.remote.unified_log import UnifiedLog

ME = 1


def make_partition(
    tmp_path: Path, state: PartitionState, *, records: int = 0, high_watermark: int = 0
) -> Partition:
    log = Log(tmp_path / "t-0", LogConfig())
    for _ in range(records):
        log.append(make_batch(1))
    return Partition(
        "t",
        uuid.uuid4(),
        0,
        UnifiedLog(log, None, "t", 0),
        state,
        ME,
        high_watermark=high_watermark,
    )


def test_the_only_isr_member_moves_the_high_watermark_to_its_log_end(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME]), records=3)
    assert p.high_watermark == 3  # recomputed as leader, whatever was checkpointed
    p.append(make_batch(2), acks=1, min_insync_replicas=1)
    assert p.high_watermark == 5


def test_with_followers_the_high_watermark_waits_for_them(tmp_path: Path) -> None:
    # Leader with an ISR of two: the follower has not fetched, so nothing is committed
    # beyond the checkpointed high watermark.
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME, 2]), records=3, high_watermark=1)
    p.append(make_batch(2), acks=1, min_insync_replicas=1)
    assert p.high_watermark == 1
    records = asyncio.run(p.read(0, 1 << 20, read_committed=False, min_one_batch=True)).records
    assert records is not None and records.size == len(make_batch(1))  # offset 0 only


def test_a_checkpointed_high_watermark_is_clamped_to_the_log(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(2, 0, [2, ME]), records=3, high_watermark=99)
    assert p.high_watermark == 3
    p.truncate_to(1)
    assert p.high_watermark == 1


def test_a_follower_refuses_produce(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(2, 0, [2, ME]))
    with pytest.raises(PartitionError) as caught:
        p.append(make_batch(1), acks=1, min_insync_replicas=1)
    assert caught.value.code == NOT_LEADER_OR_FOLLOWER


def test_acks_all_needs_min_insync_replicas(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME]))
    with pytest.raises(PartitionError) as caught:
        p.append(make_batch(1), acks=-1, min_insync_replicas=2)
    assert caught.value.code == NOT_ENOUGH_REPLICAS
    assert p.local.log_end_offset == 0  # nothing written
    p.append(make_batch(1), acks=1, min_insync_replicas=2)  # acks=1 does not wait for it


def test_delete_records_only_below_the_high_watermark(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME, 2]), records=4, high_watermark=2)
    with pytest.raises(PartitionError) as caught:
        asyncio.run(p.delete_records(3))
    assert caught.value.code == OFFSET_OUT_OF_RANGE
    assert asyncio.run(p.delete_records(-1)) == 2  # -1: up to the high watermark


def test_long_polls_wake_when_the_high_watermark_moves(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(ME, 0, [ME]))

    async def scenario() -> bool:
        waiter = p.waiter()
        await asyncio.sleep(0)
        assert not waiter.done()
        p.append(make_batch(1), acks=1, min_insync_replicas=1)
        await asyncio.wait_for(waiter, 1)
        return waiter.done()

    assert asyncio.run(scenario())


def test_a_follower_appends_a_fetch_larger_than_a_segment_in_runs(tmp_path: Path) -> None:
    # A fetch brings up to replica.fetch.max.bytes; a topic's segments may be smaller.
    leader_log = Log(tmp_path / "leader" / "t-0", LogConfig.from_props({"segment.bytes": 4096}))
    for _ in range(12):
        leader_log.append(make_batch(10, value_size=100))
    fetched = b"".join(segment.path.read_bytes() for segment in leader_log.segments)
    assert len(fetched) > 4096
    follower_log = Log(tmp_path / "t-0", LogConfig.from_props({"segment.bytes": 4096}))
    follower = Partition(
        "t",
        uuid.uuid4(),
        0,
        UnifiedLog(follower_log, None, "t", 0),
        PartitionState(2, 0, [2, ME]),
        ME,
    )
    info = follower.append_as_follower(fetched)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 119, 120)
    assert follower_log.log_end_offset == 120 and len(follower_log.segments) > 1
