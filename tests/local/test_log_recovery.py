from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest

from tierlog.local.errors import CorruptSegmentError
from tierlog.local.leader_epoch import EpochEntry
from tierlog.local.log import Log
from tierlog.records.header import parse_header

from .conftest import (
    T0,
    LogFactory,
    all_records,
    assert_dense,
    crash,
    dir_snapshot,
    make_batch,
)

SEGMENT_BYTES = 1200


def fill(lg: Log, batches: int, epoch: int = 0) -> list[int]:
    """Append batches of 3 records (~250 bytes); returns each batch's base offset."""
    bases = []
    for i in range(batches):
        info = lg.append(
            make_batch(3, value_size=50, base_timestamp=T0 + 10 * lg.log_end_offset + i),
            leader_epoch=epoch,
        )
        bases.append(info.first_offset)
    return bases


def index_files(log_dir: Path) -> dict[str, bytes]:
    return {k: v for k, v in dir_snapshot(log_dir).items() if k.endswith("index")}


def test_unclean_reopen_truncates_a_torn_tail_and_logs_it(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    active = lg.active_segment
    last_whole = active.size
    end = lg.log_end_offset
    recovery_point = lg.recovery_point
    crash(lg)
    torn = make_batch(3, value_size=50)
    with open(active.path, "ab") as f:
        f.write(torn[:100])  # the start of a batch that never finished
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, recovery_point=recovery_point)
    assert again.log_end_offset == end
    assert again.active_segment.size == last_whole == os.path.getsize(active.path)
    assert again.recovered_bytes_truncated == 100
    assert_dense(again)
    # the log names the segment, what was dropped and where the log now ends
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(
        active.path.name in m and "truncated 100 corrupt bytes" in m and f"offset {end}" in m
        for m in messages
    ), messages
    assert again.append(make_batch(1)).first_offset == end


def test_unclean_reopen_with_garbage_after_the_last_batch(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 4)
    end, size = lg.log_end_offset, lg.active_segment.size
    path = lg.active_segment.path
    crash(lg)
    with open(path, "ab") as f:
        f.write(os.urandom(37))
    again = make_log(segment_bytes=SEGMENT_BYTES)
    assert (again.log_end_offset, again.active_segment.size) == (end, size)


def test_a_corrupt_batch_in_a_closed_segment_is_marked_and_later_segments_are_kept(
    make_log: LogFactory, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 20, item 1: recovery used to truncate at the bad batch and delete every later
    segment. Only the tail past the recovery point may be cut; this is acknowledged data."""
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 16)
    assert len(lg.segments) >= 4
    victim = lg.segments[1]
    found = list(victim.batches())
    (position, damaged), after = found[1], found[2][1]
    bases = [s.base_offset for s in lg.segments]
    end = lg.log_end_offset
    crash(lg)
    # flip a byte in the 2nd batch of segment 1 (inside its records: CRC fails)
    with open(victim.path, "r+b") as f:
        f.seek(position + 80)
        byte = f.read(1)[0]
        f.seek(position + 80)
        f.write(bytes([byte ^ 0x01]))
    with caplog.at_level(logging.WARNING, logger="tierlog.local"):
        again = make_log(segment_bytes=SEGMENT_BYTES, recovery_point=0)
    assert [s.base_offset for s in again.segments] == bases
    assert again.log_end_offset == end
    assert again.recovered_bytes_truncated == 0
    assert "invalid batch at position" not in caplog.text  # a CRC failure: not structural
    assert "later segments are kept" in caplog.text
    # Only the damaged batch is refused; what is before and after it is served.
    with pytest.raises(CorruptSegmentError):
        again.read(damaged.base_offset, 1 << 20)
    before = again.read(victim.base_offset, 1 << 20)
    assert before is not None and before.position + before.size == position
    before.release()
    later = again.read(after.base_offset, 1 << 20)
    assert later is not None and parse_header(later.read()).base_offset == after.base_offset
    later.release()
    assert (log_dir / "damage-marks").exists()  # kept marked after the next start too
    assert again.append(make_batch(1)).first_offset == end


def test_corrupt_first_batch_of_a_segment_leaves_it_empty(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    second = lg.segments[1]
    crash(lg)
    with open(second.path, "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">i", 10))  # a batchLength too small for a header
    again = make_log(segment_bytes=SEGMENT_BYTES, recovery_point=0)
    assert again.log_end_offset == second.base_offset
    assert [s.base_offset for s in again.segments] == [0, second.base_offset]
    assert again.active_segment.size == 0


def test_closed_segments_below_the_recovery_point_are_not_rescanned(
    make_log: LogFactory, log_dir: Path, counted_recover: list[int]
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 16)
    lg.flush()
    bases = [s.base_offset for s in lg.segments]
    recovery_point = lg.segments[-2].base_offset + 1  # inside the next-to-last segment
    crash(lg)
    # corrupt a byte inside the first (closed, flushed) segment's records
    first = log_dir / "00000000000000000000.log"
    data = bytearray(first.read_bytes())
    data[150] ^= 0xFF
    first.write_bytes(bytes(data))
    counted_recover.clear()
    again = make_log(segment_bytes=SEGMENT_BYTES, recovery_point=recovery_point)
    # only the segment holding the recovery point and those after it were scanned
    assert counted_recover == bases[-2:]
    # the corruption below the recovery point went unnoticed: nothing was truncated
    assert [s.base_offset for s in again.segments] == bases
    assert first.read_bytes() == bytes(data)
    assert again.recovered_bytes_truncated == 0


def test_recovery_point_zero_rescans_everything(
    make_log: LogFactory, log_dir: Path, counted_recover: list[int]
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    bases = [s.base_offset for s in lg.segments]
    crash(lg)
    counted_recover.clear()
    again = make_log(segment_bytes=SEGMENT_BYTES, recovery_point=0)
    assert counted_recover == bases
    assert again.recovery_point == again.log_end_offset


def test_clean_reopen_rescans_nothing(
    make_log: LogFactory, log_dir: Path, counted_recover: list[int]
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 10)
    lg.close()
    counted_recover.clear()
    make_log(segment_bytes=SEGMENT_BYTES, had_clean_shutdown=True)
    assert counted_recover == []


def test_unclean_reopen_rebuilds_the_preallocated_active_indexes(
    make_log: LogFactory, log_dir: Path
) -> None:
    lg = make_log(segment_bytes=10**6, index_interval_bytes=300)
    fill(lg, 12)
    name = lg.active_segment.path.stem
    expected = (
        {(off, pos) for off, pos in lg.active_segment.offset_index},
        list(lg.active_segment.time_index),
    )
    end = lg.log_end_offset
    crash(lg)
    # an unclean stop leaves the active indexes at their preallocated size, zero-padded
    assert (log_dir / f"{name}.index").stat().st_size == 10 << 20
    again = make_log(segment_bytes=10**6, index_interval_bytes=300, recovery_point=end)
    seg = again.active_segment
    assert ({(o, p) for o, p in seg.offset_index}, list(seg.time_index)) == expected
    for offset in range(end):
        found = again.read(offset, 1)
        assert found is not None
    assert again.offset_for_timestamp(T0) == (0, T0)


def test_missing_indexes_are_rebuilt(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=100)
    fill(lg, 12)
    lg.close()
    before = index_files(log_dir)
    assert any(before[k] for k in before)  # there are entries to lose
    for name in before:
        if name.startswith("00000000000000000000."):
            (log_dir / name).unlink()
    again = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=100, had_clean_shutdown=True)
    assert again.segments[0].offset_index.entries > 0
    again.close()
    assert index_files(log_dir) == before


def test_missing_time_index_alone_is_rebuilt(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=100)
    fill(lg, 12)
    lg.close()
    before = index_files(log_dir)
    (log_dir / "00000000000000000000.timeindex").unlink()
    again = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=100, had_clean_shutdown=True)
    again.close()
    assert index_files(log_dir) == before


@pytest.mark.parametrize(
    ("suffix", "damage"),
    [
        (".index", b"\x00\x00\x00\x05\x7f\xff\xff\xff"),  # entry points past the log
        (".index", b"\x01\x02\x03"),  # not a whole entry
        (".timeindex", b"\x00" * 12),  # timestamp below the first entry's
        (".timeindex", b"\x00" * 5),
    ],
)
def test_corrupt_indexes_are_rebuilt(
    make_log: LogFactory, log_dir: Path, suffix: str, damage: bytes
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=100)
    fill(lg, 12)
    lg.close()
    before = index_files(log_dir)
    with open(log_dir / f"00000000000000000000{suffix}", "ab") as f:
        f.write(damage)
    again = make_log(segment_bytes=SEGMENT_BYTES, index_interval_bytes=100, had_clean_shutdown=True)
    assert_dense(again)
    again.close()
    assert index_files(log_dir) == before


def test_recovered_data_is_readable_record_by_record(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 9)
    records = all_records(lg)
    crash(lg)
    again = make_log(segment_bytes=SEGMENT_BYTES)
    assert all_records(again) == records


def test_epoch_cache_is_truncated_to_the_recovered_end(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(segment_bytes=10**6)
    fill(lg, 2, epoch=1)
    end = lg.log_end_offset
    size = lg.active_segment.size
    fill(lg, 2, epoch=2)
    assert lg.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(2, end)]
    path = lg.active_segment.path
    crash(lg)
    with open(path, "r+b") as f:
        f.truncate(size + 20)  # the epoch-2 batches are torn away
    again = make_log(segment_bytes=10**6)
    assert again.log_end_offset == end
    assert again.leader_epoch_cache.entries == [EpochEntry(1, 0)]
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"


def test_empty_directory_with_a_log_start_offset(make_log: LogFactory, log_dir: Path) -> None:
    lg = make_log(log_start_offset=77)
    assert (lg.log_start_offset, lg.log_end_offset) == (77, 77)
    assert (log_dir / "00000000000000000077.log").exists()
