"""UnifiedLog: one partition's offsets over both tiers; the one place that picks the tier."""

from __future__ import annotations

import asyncio
import logging
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.remote.conftest import PARTITION, T0, TOPIC, TOPIC_ID, batch
from tierlog.local.config import LogConfig
from tierlog.local.errors import OffsetOutOfRangeError
from tierlog.local.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Log
from tierlog.local.segment import FileSlice
from tierlog.records.header import iter_batches
from tierlog.remote.api import RemoteDataLostError, RemoteStorageUnavailableError
from tierlog.remote.fsspec_storage import FsspecRemoteStore
from tierlog.remote.remote_log_manager import RemoteLogManager
from tierlog.remote.unified_log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    UnifiedLog,
)
from tierlog.util.clock import ManualClock

BATCHES = 40
BATCH_MS = 1000


class Tiered:
    """A tiered log whose older segments were offloaded, then deleted locally."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = ManualClock(T0)
        config = LogConfig.from_props(
            {
                "segment.bytes": 2048,
                "remote.storage.enable": True,
                "retention.ms": -1,
                "local.retention.bytes": 4096,
                "file.delete.delay.ms": 0,
            }
        )
        self.local = Log(tmp_path / "data" / f"{TOPIC}-{PARTITION}", config, clock=self.clock)
        for n in range(BATCHES):
            self.local.append(batch(4, T0 + n * BATCH_MS), leader_epoch=n // 10)
        self.high_watermark = self.local.log_end_offset
        store = FsspecRemoteStore((tmp_path / "remote").as_uri())
        self.remote = RemoteLogManager(store, tmp_path / f"cache-{uuid.uuid4().hex}", 0)
        self.log = UnifiedLog(self.local, self.remote, TOPIC, PARTITION)

    def track(self) -> None:
        self.remote.track(
            TOPIC, PARTITION, TOPIC_ID, self.local, lambda: 0, lambda: self.high_watermark
        )

    def offload_and_trim(self) -> None:
        self.track()
        asyncio.run(self.remote.run_cycle())
        self.local.delete_old_segments()
        assert self.local.log_start_offset > 0, "the test needs remote-only offsets"

    def close(self) -> None:
        self.remote.close()
        self.local.close()


@pytest.fixture
def tiered(tmp_path: Path) -> Iterator[Tiered]:
    t = Tiered(tmp_path)
    try:
        yield t
    finally:
        t.close()


def first_offset(records: FileSlice | bytes | None) -> int:
    assert records is not None
    data = records.read() if isinstance(records, FileSlice) else records
    return next(iter_batches(data))[1].base_offset


def read(t: Tiered, offset: int) -> tuple[FileSlice | bytes | None, int]:
    result = asyncio.run(
        t.log.read(offset, 1 << 20, max_offset=t.high_watermark, min_one_batch=True)
    )
    return result.records, result.log_start_offset


def test_offsets_below_the_local_start_come_from_the_remote_tier(tiered: Tiered) -> None:
    tiered.offload_and_trim()
    local_start = tiered.local.log_start_offset
    assert tiered.log.earliest_offset() == 0

    remote, start = read(tiered, 0)
    assert isinstance(remote, bytes) and first_offset(remote) == 0
    assert start == 0  # the whole log's start, not the local one

    hot, _ = read(tiered, local_start)
    assert isinstance(hot, FileSlice) and first_offset(hot) == local_start


def test_reads_stop_at_the_bound_given_by_the_replication_state(tiered: Tiered) -> None:
    tiered.track()
    tiered.high_watermark = 8
    records, _ = read(tiered, 8)
    assert records is None
    records, _ = read(tiered, 0)
    assert records is not None
    data = records.read() if isinstance(records, FileSlice) else records
    assert max(h.last_offset for _, h in iter_batches(data)) == 7


def test_an_untracked_tiered_log_says_its_remote_range_is_unknown(tiered: Tiered) -> None:
    tiered.local.advance_log_start_offset(8)
    assert tiered.log.remote_tier_unknown()
    # Not "out of range" (consumers would skip the remote data), but retriable.
    with pytest.raises(RemoteStorageUnavailableError):
        read(tiered, 0)
    with pytest.raises(RemoteStorageUnavailableError):
        asyncio.run(tiered.log.list_offset(EARLIEST_TIMESTAMP, tiered.high_watermark))


def test_below_the_earliest_offset_is_out_of_range(tiered: Tiered) -> None:
    tiered.offload_and_trim()
    asyncio.run(tiered.log.advance_log_start_offset(12))
    with pytest.raises(OffsetOutOfRangeError):
        read(tiered, 4)


def test_list_offsets_over_both_tiers(tiered: Tiered) -> None:
    tiered.offload_and_trim()
    hw = tiered.high_watermark
    local_start = tiered.local.log_start_offset
    tracked = tiered.remote.get(TOPIC, PARTITION)
    assert tracked is not None
    remote_end = tracked.remote_end()

    def lookup(ts: int) -> tuple[int, int]:
        return asyncio.run(tiered.log.list_offset(ts, hw))

    assert lookup(EARLIEST_TIMESTAMP) == (0, -1)
    assert lookup(LATEST_TIMESTAMP) == (hw, -1)
    assert lookup(EARLIEST_LOCAL_TIMESTAMP) == (local_start, -1)
    assert lookup(LATEST_TIERED_TIMESTAMP) == (remote_end - 1, -1)
    assert lookup(EARLIEST_PENDING_UPLOAD_TIMESTAMP) == (max(remote_end, local_start), -1)
    # a timestamp in the remote-only range is found there; one in the hot tail locally
    assert lookup(T0 + 1 * BATCH_MS)[0] == 4
    hot_batch = local_start // 4 + 1
    assert lookup(T0 + hot_batch * BATCH_MS)[0] == hot_batch * 4
    # nothing at or past the high watermark is visible
    assert asyncio.run(tiered.log.list_offset(T0 + (BATCHES - 1) * BATCH_MS, 8)) == (-1, -1)
    # nor at or past a lower bound (read_committed's LSO) on the remote tier either
    assert asyncio.run(tiered.log.list_offset(T0 + 1 * BATCH_MS, 4)) == (-1, -1)
    assert asyncio.run(tiered.log.list_offset(T0 + 1 * BATCH_MS, 5))[0] == 4


def test_delete_records_moves_the_start_of_both_tiers(tiered: Tiered) -> None:
    tiered.offload_and_trim()
    low = asyncio.run(tiered.log.advance_log_start_offset(6))
    assert low == 6
    assert tiered.log.earliest_offset() == 6


def test_epoch_lookups(tiered: Tiered) -> None:
    assert tiered.log.epoch_at(0) == 0
    assert tiered.log.epoch_at(40) == 1
    assert tiered.log.end_offset_for_epoch(0) == (0, 40)


def test_epochs_older_than_the_local_history_are_answered_from_the_remote_tier(
    tiered: Tiered,
) -> None:
    """Local retention cuts the local epoch history at the local log start; a follower
    whose last epoch ended in the remote range must still learn where it ended, or it
    would keep records that diverged there."""
    tiered.offload_and_trim()
    local_start = tiered.local.log_start_offset
    first_local = tiered.local.leader_epoch_cache.entries[0]
    assert first_local.start_offset == local_start and first_local.epoch > 0
    # Epochs 0..3 started at 0, 40, 80, 120 (ten 4-record batches each).
    for epoch in range(first_local.epoch):
        assert tiered.log.end_offset_for_epoch(epoch) == (epoch, 40 * (epoch + 1))
    assert tiered.log.end_offset_for_epoch(3) == (3, tiered.local.log_end_offset)


def test_a_remote_tier_that_lost_committed_data_fails_reads_loudly(
    tiered: Tiered, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An emptied bucket must not move the log start over acknowledged data: reads of the
    lost range fail (KAFKA_STORAGE_ERROR), the earliest offset stays, and only DeleteRecords
    past the range gives it up; the loss survives a restart (the local checkpoint)."""
    tiered.offload_and_trim()
    local_start = tiered.local.log_start_offset
    state = tiered.remote.get(TOPIC, PARTITION)
    assert state is not None and state.checkpoint.remote_end >= local_start
    remote_end = state.checkpoint.remote_end
    shutil.rmtree(tmp_path / "remote")  # the bucket is emptied
    with caplog.at_level(logging.ERROR):
        asyncio.run(tiered.remote.run_cycle())
    assert any("lost committed data" in r.getMessage() for r in caplog.records)
    # Lost: what only the remote tier held (the local log still has its start onwards).
    assert remote_end > local_start
    assert state.lost() == (0, local_start)
    assert tiered.remote.lost_ranges == 1
    with pytest.raises(RemoteDataLostError):
        asyncio.run(
            tiered.log.read(0, 1 << 20, max_offset=tiered.high_watermark, min_one_batch=True)
        )
    assert tiered.log.earliest_offset() == 0
    assert asyncio.run(tiered.log.list_offset(EARLIEST_TIMESTAMP, tiered.high_watermark)) == (
        0,
        -1,
    )
    # A restarted manager knows of the loss from the partition's checkpoint file.
    tiered.remote.close()
    tiered.remote = RemoteLogManager(
        FsspecRemoteStore((tmp_path / "remote").as_uri()),
        tmp_path / f"cache-{uuid.uuid4().hex}",
        0,
    )
    tiered.log = UnifiedLog(tiered.local, tiered.remote, TOPIC, PARTITION)
    tiered.track()
    asyncio.run(tiered.remote.run_cycle())
    restarted = tiered.remote.get(TOPIC, PARTITION)
    assert restarted is not None and restarted.lost() == (0, local_start)
    # DeleteRecords past the loss gives it up knowingly; reads from there work.
    asyncio.run(tiered.log.advance_log_start_offset(local_start))
    assert restarted.lost() is None
    assert tiered.log.earliest_offset() == local_start
    read = asyncio.run(
        tiered.log.read(local_start, 1 << 20, max_offset=tiered.high_watermark, min_one_batch=True)
    )
    assert first_offset(read.records) == local_start
