from __future__ import annotations

from pathlib import Path

import pytest

from tierlog.local.leader_epoch import EpochEntry
from tierlog.local.log import Log
from tierlog.local.segment import LogSegment, SegmentState
from tierlog.util.clock import ManualClock
from tierlog.util.scheduler import ManualScheduler

from .conftest import T0, LogFactory, assert_dense, make_batch

HOUR = 3_600_000


def segment_of(lg: Log, batch_ts: list[int]) -> None:
    """Append one ~280-byte batch per timestamp (with segment.bytes=700: two per segment)."""
    for ts in batch_ts:
        lg.append(make_batch(2, value_size=100, base_timestamp=ts))


def log_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".log" in p.name)


def test_retention_ms_by_max_timestamp(make_log: LogFactory, clock: ManualClock) -> None:
    lg = make_log(segment_bytes=700, retention_ms=10 * HOUR)
    # segments: [T0, T0+1h] [T0+2h, T0+3h] [T0+4h, T0+5h] [active: T0+6h]
    segment_of(lg, [T0 + h * HOUR for h in range(7)])
    assert [s.base_offset for s in lg.segments] == [0, 4, 8, 12]
    # the first segment's max timestamp is T0+1h+1 (records are stamped base+i)
    clock.advance(11 * HOUR + 1)  # exactly retention.ms old: not yet *more*
    assert lg.delete_old_segments() == 0
    clock.advance(1)
    assert lg.delete_old_segments() == 1
    assert [s.base_offset for s in lg.segments] == [4, 8, 12]
    assert lg.log_start_offset == 4
    clock.advance(2 * HOUR)
    assert lg.delete_old_segments() == 1
    assert lg.log_start_offset == 8
    assert_dense(lg)


def test_retention_ms_uses_the_largest_timestamp_not_the_first(
    make_log: LogFactory, clock: ManualClock
) -> None:
    lg = make_log(segment_bytes=700, retention_ms=HOUR)
    segment_of(lg, [T0 - 5 * HOUR, T0 + 5 * HOUR, T0])
    clock.advance(2 * HOUR)
    # the first segment's max timestamp is in the future: kept
    assert lg.delete_old_segments() == 0


def test_retention_ms_minus_one_keeps_forever(make_log: LogFactory, clock: ManualClock) -> None:
    lg = make_log(segment_bytes=700, retention_ms=-1)
    segment_of(lg, [T0] * 6)
    clock.advance(10**12)
    assert lg.delete_old_segments() == 0


def test_retention_bytes(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=700, retention_ms=-1)
    segment_of(lg, [T0] * 9)  # 4 full segments of 2 batches + active with 1
    sizes = [s.size for s in lg.segments]
    assert len(sizes) == 5
    total = sum(sizes)
    # Kafka's rule: a segment goes only if the log stays >= retention.bytes without it
    lg.config = lg.config.with_overrides({"retention.bytes": total - sizes[0] + 1})
    assert lg.delete_old_segments() == 0
    lg.config = lg.config.with_overrides({"retention.bytes": total - sizes[0]})
    assert lg.delete_old_segments() == 1
    assert lg.size == total - sizes[0]
    # a limit exactly the size: nothing
    lg.config = lg.config.with_overrides({"retention.bytes": lg.size})
    assert lg.delete_old_segments() == 0
    # a limit below the active segment alone: every closed segment goes, the active stays
    lg.config = lg.config.with_overrides({"retention.bytes": 1})
    assert lg.delete_old_segments() == 3
    assert len(lg.segments) == 1
    assert lg.log_start_offset == lg.active_segment.base_offset == 16


def test_active_segment_is_never_deleted(make_log: LogFactory, clock: ManualClock) -> None:
    lg = make_log(retention_ms=1, retention_bytes=0)
    lg.append(make_batch(3, base_timestamp=T0))
    clock.advance(10 * HOUR)
    assert lg.delete_old_segments() == 0
    assert lg.log_end_offset == 3 and lg.log_start_offset == 0
    assert lg.read(0, 1000) is not None


def test_compact_policy_ignores_time_and_size(make_log: LogFactory, clock: ManualClock) -> None:
    lg = make_log(segment_bytes=700, retention_ms=1, retention_bytes=0, cleanup_policy="compact")
    segment_of(lg, [T0] * 5)
    clock.advance(HOUR)
    assert lg.delete_old_segments() == 0
    # but segments below the log start offset still go
    lg.advance_log_start_offset(4)
    assert lg.delete_old_segments() == 1


def test_delete_records_then_segments_wholly_below_go(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=700, retention_ms=-1)
    segment_of(lg, [T0] * 7)  # segments at 0, 4, 8 and active 12
    assert lg.advance_log_start_offset(6) == 6
    # readable range shrinks at once, files go at the next retention pass
    assert lg.read(6, 10) is not None
    assert len(lg.segments) == 4
    assert lg.delete_old_segments() == 1  # only [0, 4) lies wholly below 6
    assert [s.base_offset for s in lg.segments] == [4, 8, 12]
    assert lg.log_start_offset == 6  # not moved back to the segment base
    assert lg.advance_log_start_offset(3) == 6  # never goes backwards
    lg.advance_log_start_offset(8)
    assert lg.delete_old_segments() == 1
    assert lg.log_start_offset == 8


def test_may_delete_guard_stops_deletion(make_log: LogFactory, clock: ManualClock) -> None:
    lg = make_log(segment_bytes=700, retention_ms=HOUR)
    segment_of(lg, [T0] * 7)
    clock.advance(2 * HOUR)
    seen: list[int] = []

    def uploaded(segment: LogSegment) -> bool:
        seen.append(segment.base_offset)
        return segment.base_offset < 4  # only the first segment is safely remote

    assert lg.delete_old_segments(may_delete=uploaded) == 1
    assert seen == [0, 4]
    assert [s.base_offset for s in lg.segments] == [4, 8, 12]
    assert lg.delete_old_segments(may_delete=lambda s: False) == 0
    assert lg.delete_old_segments() == 2


def test_retention_advances_the_epoch_cache_start(make_log: LogFactory, clock: ManualClock) -> None:
    lg = make_log(segment_bytes=700, retention_ms=HOUR)
    for epoch in range(5):
        lg.append(make_batch(2, value_size=100, base_timestamp=T0), leader_epoch=epoch)
    clock.advance(2 * HOUR)
    lg.delete_old_segments()
    assert lg.log_start_offset == 8
    assert lg.leader_epoch_cache.entries == [EpochEntry(4, 8)]


def test_deleted_segments_are_renamed_then_unlinked_after_the_delay(
    make_log: LogFactory, scheduler: ManualScheduler, log_dir: Path, clock: ManualClock
) -> None:
    lg = make_log(
        scheduler=scheduler, segment_bytes=700, retention_ms=HOUR, file_delete_delay_ms=60_000
    )
    segment_of(lg, [T0] * 5)
    scheduler.advance(0)  # the roll flushes
    doomed = lg.segments[:2]
    part = lg.read(0, 10_000)  # a fetch in flight on the first segment
    assert part is not None
    expected = part.read()
    clock.advance(2 * HOUR)
    assert lg.delete_old_segments() == 2
    assert all(s.state is SegmentState.DELETED for s in doomed)
    assert log_files(log_dir) == [
        "00000000000000000000.log.deleted",
        "00000000000000000004.log.deleted",
        "00000000000000000008.log",
    ]
    assert (log_dir / "00000000000000000000.index.deleted").exists()
    assert (log_dir / "00000000000000000000.timeindex.deleted").exists()
    assert part.read() == expected  # the in-flight read still works
    scheduler.advance(59_999)
    assert len(log_files(log_dir)) == 3
    scheduler.advance(1)
    assert log_files(log_dir) == ["00000000000000000008.log"]
    assert not any(p.name.endswith(".deleted") for p in log_dir.iterdir())


def test_without_a_scheduler_segments_are_deleted_at_once(
    make_log: LogFactory, log_dir: Path, clock: ManualClock
) -> None:
    lg = make_log(segment_bytes=700, retention_ms=HOUR)
    segment_of(lg, [T0] * 5)
    clock.advance(2 * HOUR)
    lg.delete_old_segments()
    assert log_files(log_dir) == ["00000000000000000008.log"]


def test_zero_delay_deletes_at_once(
    make_log: LogFactory, scheduler: ManualScheduler, log_dir: Path, clock: ManualClock
) -> None:
    lg = make_log(scheduler=scheduler, segment_bytes=700, retention_ms=HOUR, file_delete_delay_ms=0)
    segment_of(lg, [T0] * 5)
    clock.advance(2 * HOUR)
    lg.delete_old_segments()
    assert log_files(log_dir) == ["00000000000000000008.log"]


def test_reopen_after_retention_keeps_the_start(
    make_log: LogFactory, scheduler: ManualScheduler, log_dir: Path, clock: ManualClock
) -> None:
    lg = make_log(scheduler=scheduler, segment_bytes=700, retention_ms=HOUR)
    segment_of(lg, [T0] * 5)
    clock.advance(2 * HOUR)
    lg.delete_old_segments()
    lg.close()
    # renamed files left by a stop before the delay ran are removed at open
    again = make_log(segment_bytes=700, had_clean_shutdown=True)
    assert again.log_start_offset == 8
    assert log_files(log_dir) == ["00000000000000000008.log"]


@pytest.mark.parametrize("retention_bytes", [0, 1, 10**9])
def test_retention_bytes_never_breaks_density(make_log: LogFactory, retention_bytes: int) -> None:
    lg = make_log(segment_bytes=700, retention_ms=-1, retention_bytes=retention_bytes)
    for _ in range(4):
        segment_of(lg, [T0] * 3)
        lg.delete_old_segments()
        assert_dense(lg)
        assert lg.log_start_offset == lg.segments[0].base_offset


def test_a_large_deleted_segment_is_unlinked_off_the_callers_thread(
    make_log: LogFactory,
    scheduler: ManualScheduler,
    log_dir: Path,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time

    from tierlog.local import segment as segment_module

    monkeypatch.setattr(segment_module, "_BACKGROUND_UNLINK_BYTES", 1000)
    lg = make_log(
        scheduler=scheduler, segment_bytes=1500, retention_ms=HOUR, file_delete_delay_ms=10
    )
    for i in range(30):
        lg.append(make_batch(4, value_size=100, base_timestamp=T0 + i))
    scheduler.advance(0)
    unlinked_on: list[str] = []
    real_unlink = Path.unlink

    def recording_unlink(path: Path, missing_ok: bool = False) -> None:
        if path.name.endswith(".log.deleted"):
            unlinked_on.append(threading.current_thread().name)
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", recording_unlink)
    clock.advance(2 * HOUR)
    assert lg.delete_old_segments() > 0
    scheduler.advance(10)
    deadline = time.monotonic() + 10
    while any(p.name.endswith(".log.deleted") for p in log_dir.iterdir()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert unlinked_on and all(name.startswith("segment-unlink") for name in unlinked_on)
