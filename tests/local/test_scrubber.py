"""tierlog.local.scrubber: finding damaged batches in closed segments, marking them
unreadable, and pacing the work (issue 10, item 2)."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import struct
import threading
import time
from pathlib import Path

import pytest

from tierlog.local import scrubber as scrubber_module
from tierlog.local.errors import CorruptSegmentError
from tierlog.local.log import Log
from tierlog.local.scrubber import RateLimiter, Scrubber, Stopped, verify_segment_crc
from tierlog.local.segment import FileSlice
from tierlog.util.clock import SystemClock

from .conftest import T0, LogFactory, make_batch

SEGMENT_BYTES = 4000


def fill(lg: Log, batches: int) -> None:
    for i in range(batches):
        lg.append(make_batch(3, value_size=50, base_timestamp=T0 + i))


def flip(path: Path, position: int, n: int = 8) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        data = f.read(n)
        f.seek(position)
        f.write(bytes(b ^ 0xFF for b in data))


def batch_positions(lg: Log, segment_index: int) -> list[tuple[int, int, int]]:
    """(position, base offset, last offset) of each batch of a segment."""
    return [(p, h.base_offset, h.last_offset) for p, h in lg.segments[segment_index].batches()]


def test_a_whole_segment_has_no_problems(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    for segment in lg.segments:
        assert verify_segment_crc(segment.path) == []


def test_flipped_bytes_are_found_with_their_offsets_and_the_walk_goes_on(
    make_log: LogFactory,
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    batches = batch_positions(lg, 1)
    path = lg.segments[1].path
    (p1, b1, l1), (p2, _, _) = batches[3], batches[4]
    (p3, b3, l3) = batches[-1]
    flip(path, p1 + 100)  # inside the records: only the CRC can tell
    flip(path, p3 + 80)
    problems = verify_segment_crc(path)
    assert [(p.position, p.end_position, p.first_offset, p.last_offset) for p in problems] == [
        (p1, p2, b1, l1),
        (p3, path.stat().st_size, b3, l3),
    ]
    assert all("CRC-32C" in p.problem and p.path == str(path) for p in problems)


def test_a_damaged_length_runs_to_the_end_of_the_file(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    position, base, _ = batch_positions(lg, 0)[5]
    path = lg.segments[0].path
    with open(path, "r+b") as f:
        f.seek(position + 8)
        f.write(struct.pack(">i", 0x7FFF0000))
    (problem,) = verify_segment_crc(path)
    assert (problem.position, problem.end_position) == (position, path.stat().st_size)
    assert (problem.first_offset, problem.last_offset) == (base, -1)
    assert "runs past the end" in problem.problem


def test_a_pass_marks_the_damage_and_reads_stop_before_it(
    make_log: LogFactory, caplog: pytest.LogCaptureFixture
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    position, base, last = batch_positions(lg, 1)[4]
    segment = lg.segments[1]
    flip(segment.path, position + 100)
    scrubber = Scrubber(lambda: {("t", 0): lg}, 100 << 20, min_pass_interval_s=0)
    with caplog.at_level(logging.ERROR, logger="tierlog.local.scrubber"):
        found = asyncio.run(scrubber.run_pass())
    assert found == 1
    (record,) = [r for r in caplog.records if "scrubber" in r.getMessage()]
    message = record.getMessage()
    assert lg.name in message and f"offsets {base}-{last}" in message
    assert str(segment.path) in message
    assert scrubber.stats.corrupt_batches == 1
    assert scrubber.stats.verified_segments == len(lg.segments) - 1
    assert scrubber.stats.completed_passes == 1
    assert list(scrubber.stats.damaged) == [lg.name]
    # The damaged batch and everything from it are refused; what precedes it is served,
    # the slice ending right before the damage.
    for offset in (base, last):
        with pytest.raises(CorruptSegmentError) as raised:
            lg.read(offset, 1 << 20)
        assert raised.value.code == 56
    before = lg.read(segment.base_offset, 1 << 20)
    assert before is not None
    assert before.position + before.size == position
    before.release()
    # A second pass finds it again but reports it once.
    assert asyncio.run(scrubber.run_pass()) == 1
    assert scrubber.stats.corrupt_batches == 1


def test_a_segment_that_cannot_be_examined_gives_its_lease_back(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 60)
    closed = lg.segments[:-1]
    assert len(closed) >= 2
    real_fstat = os.fstat
    failed: list[int] = []

    def fstat(fd: int) -> os.stat_result:
        if not failed:  # the walk's first look at the first segment's file
            failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        return real_fstat(fd)

    monkeypatch.setattr(scrubber_module.os, "fstat", fstat)
    # Only explicit releases count: the collector's backstop would hide a leak as soon as
    # the walk's next lease replaced the dropped one.
    monkeypatch.setattr(FileSlice, "__del__", lambda self: None)
    scrubber = Scrubber(lambda: {("t", 0): lg}, 1 << 30, min_pass_interval_s=0)
    assert asyncio.run(asyncio.wait_for(scrubber.run_pass(), 30)) == 0
    monkeypatch.undo()
    assert failed == [closed[0].fd]
    # Its lease is back (a leaked one would make every truncation of it copy, and keep
    # its fd open after the segment is deleted); the others were checked.
    assert [segment.leases for segment in closed] == [0] * len(closed)
    assert scrubber.stats.verified_segments == len(closed) - 1


def test_the_active_segment_is_left_to_the_start_up_check(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 5)
    assert len(lg.segments) == 1
    flip(lg.active_segment.path, 150)
    scrubber = Scrubber(lambda: {("t", 0): lg}, 100 << 20)
    assert asyncio.run(scrubber.run_pass()) == 0


def test_retention_forgets_findings_in_deleted_segments(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    flip(lg.segments[0].path, 200)
    scrubber = Scrubber(lambda: {("t", 0): lg}, 100 << 20)
    assert asyncio.run(scrubber.run_pass()) == 1
    lg.advance_log_start_offset(lg.segments[1].base_offset)
    lg.delete_old_segments()
    asyncio.run(scrubber.run_pass())
    assert scrubber.stats.damaged == {}


def test_the_rate_limiter_paces_and_stops() -> None:
    stop = threading.Event()
    limiter = RateLimiter(1 << 20, stop, SystemClock())  # 1 MiB/s
    started = time.monotonic()
    for _ in range(4):
        limiter(64 * 1024)
    assert time.monotonic() - started >= 0.2  # 256 KiB at 1 MiB/s: ~0.25 s
    stop.set()
    with pytest.raises(Stopped):
        limiter(1)


def test_scrubbing_is_paced_to_the_rate(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=64 * 1024)
    for i in range(120):
        lg.append(make_batch(10, value_size=250, base_timestamp=T0 + i))
    closed = sum(s.size for s in lg.segments[:-1])
    assert closed > 200_000
    scrubber = Scrubber(lambda: {("t", 0): lg}, 1 << 20)
    started = time.monotonic()
    asyncio.run(scrubber.run_pass())
    elapsed = time.monotonic() - started
    assert elapsed >= 0.8 * (closed - 64 * 1024) / (1 << 20)
    assert scrubber.stats.verified_bytes == closed


def test_a_crc_failure_followed_by_a_broken_length_is_bounded(make_log: LogFactory) -> None:
    lg = make_log(segment_bytes=SEGMENT_BYTES)
    fill(lg, 40)
    batches = batch_positions(lg, 0)
    path = lg.segments[0].path
    (p1, b1, l1), (p2, b2, _) = batches[3], batches[4]
    flip(path, p1 + 100)
    with open(path, "r+b") as f:
        f.seek(p2 + 8)
        f.write(struct.pack(">i", 0x7FFF0000))
    first, second = verify_segment_crc(path)
    assert (first.position, first.end_position, first.first_offset, first.last_offset) == (
        p1,
        p2,
        b1,
        l1,
    )
    assert (second.position, second.first_offset, second.last_offset) == (p2, b2, -1)
