from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierlog.local.index import CorruptIndexError
from tierlog.local.segment import (
    BatchEntry,
    FileSlice,
    LogSegment,
    SegmentState,
    segment_name,
)
from tierlog.local.time_index import NO_TIMESTAMP
from tierlog.records.header import iter_batches, validate_batch

from .conftest import T0, make_batch

BASE = 100


def open_segment(
    directory: Path,
    base: int = BASE,
    *,
    interval: int = 0,
    max_index_size: int = 4096,
    created_ms: int = T0,
) -> LogSegment:
    seg = LogSegment(
        directory,
        base,
        index_interval_bytes=interval,
        max_index_size=max_index_size,
        created_ms=created_ms,
    )
    seg.make_active()
    return seg


def append(seg: LogSegment, *batches: bytes) -> list[int]:
    """Append batches (offsets rewritten to continue from the segment's next offset);
    returns each batch's position."""
    buffers: list[bytes] = []
    entries: list[BatchEntry] = []
    offset = seg.next_offset
    position = 0
    positions = []
    for raw in batches:
        header = validate_batch(raw)
        data = bytearray(raw)
        data[:8] = offset.to_bytes(8, "big", signed=True)
        buffers.append(bytes(data))
        last = offset + header.last_offset_delta
        entries.append(BatchEntry(position, len(raw), last, header.max_timestamp))
        positions.append(seg.size + position)
        position += len(raw)
        offset = last + 1
    seg.append(buffers, entries)
    return positions


@pytest.fixture
def seg(tmp_path: Path) -> Iterator[LogSegment]:
    s = open_segment(tmp_path)
    yield s
    s.close()


def test_file_names(tmp_path: Path) -> None:
    assert segment_name(42) == "00000000000000000042"
    s = open_segment(tmp_path, 42)
    assert s.path.name == "00000000000000000042.log"
    assert s.offset_index.path.name == "00000000000000000042.index"
    assert s.time_index.path.name == "00000000000000000042.timeindex"
    s.close()


def test_append_and_read_back(seg: LogSegment) -> None:
    b1, b2, b3 = make_batch(3), make_batch(1), make_batch(5, value_size=100)
    positions = append(seg, b1, b2, b3)
    assert positions == [0, len(b1), len(b1) + len(b2)]
    assert seg.next_offset == BASE + 9
    assert seg.size == len(b1) + len(b2) + len(b3) == os.path.getsize(seg.path)
    data = seg.path.read_bytes()
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.last_offset) for h in headers] == [
        (100, 102),
        (103, 103),
        (104, 108),
    ]
    whole = seg.read(BASE, 10**6)
    assert whole is not None
    assert whole.read() == data
    # reading from an offset inside the second batch starts at that batch
    mid = seg.read(BASE + 3, 10**6)
    assert mid == FileSlice(seg.fd, len(b1), len(data) - len(b1))
    inner = seg.read(BASE + 6, 10**6)
    assert inner is not None and inner.position == len(b1) + len(b2)
    assert seg.read(BASE + 9, 10**6) is None


def test_sendfile_to_a_file(seg: LogSegment, tmp_path: Path) -> None:
    append(seg, make_batch(2), make_batch(3, value_size=500))
    part = seg.read(BASE + 2, 10**6)
    assert part is not None
    out = tmp_path / "out.bin"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert part.sendfile_to(fd) == part.size
    finally:
        os.close(fd)
    assert out.read_bytes() == part.read()
    assert validate_batch(out.read_bytes()).base_offset == BASE + 2


def test_find_batch(seg: LogSegment) -> None:
    b = [make_batch(2), make_batch(3), make_batch(1)]
    append(seg, *b)
    assert seg.find_batch(BASE)[0] == 0  # type: ignore[index]
    assert seg.find_batch(BASE + 1)[0] == 0  # type: ignore[index]
    pos, header = seg.find_batch(BASE + 4)  # type: ignore[misc]
    assert (pos, header.base_offset, header.last_offset) == (len(b[0]), BASE + 2, BASE + 4)
    pos, header = seg.find_batch(BASE + 5)  # type: ignore[misc]
    assert header.base_offset == BASE + 5
    assert seg.find_batch(BASE + 6) is None
    assert seg.find_batch(BASE - 50)[0] == 0  # type: ignore[index]
    assert seg.position_of(BASE + 3) == len(b[0])
    assert seg.position_of(BASE + 6) == seg.size


def test_find_batch_uses_the_index(seg: LogSegment) -> None:
    # index every batch (interval 0 indexes every batch after the first)
    batches = [make_batch(2) for _ in range(20)]
    positions = append(seg, *batches)
    assert seg.offset_index.entries == 19
    assert seg.offset_index.lookup(BASE + 21) == (BASE + 21, positions[10])
    for i, pos in enumerate(positions):
        assert seg.find_batch(BASE + 2 * i + 1)[0] == pos  # type: ignore[index]


def test_read_max_bytes_may_end_mid_batch(seg: LogSegment) -> None:
    b1, b2 = make_batch(3, value_size=50), make_batch(3, value_size=50)
    append(seg, b1, b2)
    part = seg.read(BASE, len(b1) + 10)
    assert part is not None and (part.position, part.size) == (0, len(b1) + 10)
    data = part.read()
    assert data[: len(b1)] == seg.path.read_bytes()[: len(b1)]


def test_read_min_one_batch(seg: LogSegment) -> None:
    b1, b2 = make_batch(3, value_size=200), make_batch(1)
    append(seg, b1, b2)
    part = seg.read(BASE, 10)
    assert part is not None and part.size == len(b1)
    validate_batch(part.read())
    assert seg.read(BASE, 10, min_one_batch=False) == FileSlice(seg.fd, 0, 10)
    assert seg.read(BASE, 0, min_one_batch=False) is None


def test_read_bounded_by_max_position(seg: LogSegment) -> None:
    b1, b2, b3 = make_batch(2), make_batch(2), make_batch(2)
    append(seg, b1, b2, b3)
    bound = len(b1) + len(b2)
    part = seg.read(BASE, 10**6, max_position=bound)
    assert part is not None and part.size == bound
    # min_one_batch does not cross max_position either
    part = seg.read(BASE + 2, 1, max_position=bound)
    assert part is not None and (part.position, part.size) == (len(b1), len(b2))
    part = seg.read(BASE, 1, max_position=10)
    assert part is not None and part.size == 10
    assert seg.read(BASE + 4, 10**6, max_position=bound) is None


def test_index_interval(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=1000)
    batch = make_batch(1, value_size=400)  # ~480 bytes
    positions = append(seg, *[batch] * 7)
    # an entry is written for the batch that starts once more than 1000 bytes went by
    entries = [(BASE + rel, pos) for rel, pos in seg.offset_index]
    assert entries == [(BASE + 3, positions[3]), (BASE + 6, positions[6])]
    assert [(ts, BASE + rel) for ts, rel in seg.time_index] == [(T0, BASE + 0)]
    seg.close()


def test_time_index_follows_max_timestamp(seg: LogSegment) -> None:
    append(seg, make_batch(2, base_timestamp=T0 + 10))
    append(seg, make_batch(2, base_timestamp=T0 + 5))  # older: no entry
    append(seg, make_batch(2, base_timestamp=T0 + 30))
    assert seg.max_timestamp == T0 + 31
    assert seg.offset_of_max_timestamp == BASE + 5
    assert [(ts, BASE + rel) for ts, rel in seg.time_index] == [
        (T0 + 11, BASE + 1),  # indexed with the 2nd batch, max so far is the 1st's
        (T0 + 31, BASE + 5),
    ]


def test_truncate_to_mid_batch_and_reappend(seg: LogSegment) -> None:
    b = [make_batch(2, base_timestamp=T0 + 10 * i) for i in range(5)]
    positions = append(seg, *b)
    removed = seg.truncate_to(BASE + 5)  # inside the 3rd batch (104-105)
    assert removed == sum(map(len, b[2:]))
    assert seg.size == positions[2] == os.path.getsize(seg.path)
    assert seg.next_offset == BASE + 4
    assert seg.max_timestamp == T0 + 11
    assert seg.offset_of_max_timestamp == BASE + 3
    assert all(BASE + rel < BASE + 4 for rel, _ in seg.offset_index)
    assert all(BASE + rel < BASE + 4 for _, rel in seg.time_index)
    assert seg.find_batch(BASE + 4) is None
    assert seg.truncate_to(BASE + 100) == 0
    append(seg, make_batch(1, base_timestamp=T0 + 99))
    assert seg.next_offset == BASE + 5
    assert seg.find_batch(BASE + 4)[0] == positions[2]  # type: ignore[index]
    truncated_all = seg.truncate_to(BASE)
    assert truncated_all == positions[2] + len(make_batch(1))
    assert seg.size == 0 and seg.next_offset == BASE
    assert seg.max_timestamp == NO_TIMESTAMP
    assert seg.first_batch_timestamp is None


def test_clean_close_and_load_restores_state(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=300)
    stamps = [T0 + 50, T0 + 10, T0 + 90, T0 + 90, T0 + 20, T0 + 5]
    for ts in stamps:
        append(seg, make_batch(3, value_size=60, base_timestamp=ts))
    state = (
        seg.next_offset,
        seg.size,
        seg.max_timestamp,
        seg.offset_of_max_timestamp,
        seg.first_batch_timestamp,
        list(seg.offset_index),
    )
    seg.close()
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    again = LogSegment(tmp_path, BASE, index_interval_bytes=300, max_index_size=4096, created_ms=T0)
    again.load()
    assert (
        again.next_offset,
        again.size,
        again.max_timestamp,
        again.offset_of_max_timestamp,
        again.first_batch_timestamp,
        list(again.offset_index),
    ) == state
    again.close()
    # a clean load and close changes no file
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files


def test_load_with_ties_keeps_the_first_offset_of_the_max_timestamp(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=150)
    # max timestamp first reached by an unindexed batch, reached again after the last
    # index entry: both before and after a reload, the first one counts.
    batch = make_batch(1, value_size=100, base_timestamp=T0 + 9)
    append(seg, batch)
    append(seg, make_batch(1, value_size=100, base_timestamp=T0 + 1))
    append(seg, make_batch(1, value_size=100, base_timestamp=T0 + 2))
    append(seg, make_batch(1, value_size=100, base_timestamp=T0 + 9))
    assert seg.offset_index.entries >= 1
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == (T0 + 9, BASE)
    seg.close()
    again = LogSegment(tmp_path, BASE, index_interval_bytes=150, max_index_size=4096, created_ms=T0)
    again.load()
    assert (again.max_timestamp, again.offset_of_max_timestamp) == (T0 + 9, BASE)
    again.close()


def test_load_of_bad_index_raises(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    append(seg, *[make_batch(2)] * 3)
    seg.close()
    # an index entry pointing past the log end
    seg.offset_index.path.write_bytes((7).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    again = LogSegment(tmp_path, BASE, index_interval_bytes=0, max_index_size=4096, created_ms=0)
    with pytest.raises(CorruptIndexError):
        again.load()
    assert again.recover() == 0
    assert again.next_offset == BASE + 6
    assert again.offset_index.entries == 2
    again.close()


def test_recover_whole_segment_rebuilds_identical_indexes(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=200)
    for i in range(12):
        append(seg, make_batch(2, value_size=40, base_timestamp=T0 + (i * 37) % 100))
    seg.close_for_append()
    seg.close()
    index_files = {
        p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.endswith(".log")
    }
    for p in tmp_path.iterdir():
        if not p.name.endswith(".log"):
            p.unlink()
    again = LogSegment(tmp_path, BASE, index_interval_bytes=200, max_index_size=4096, created_ms=0)
    assert again.recover() == 0
    again.close_for_append()
    again.close()
    assert {
        p.name: p.read_bytes() for p in tmp_path.iterdir() if not p.name.endswith(".log")
    } == index_files


@pytest.mark.parametrize("cut", [1, 12, 60, 61, 100])
def test_recover_truncates_a_torn_tail(
    tmp_path: Path, cut: int, caplog: pytest.LogCaptureFixture
) -> None:
    seg = open_segment(tmp_path)
    b = [make_batch(3, value_size=50) for _ in range(3)]
    positions = append(seg, *b)
    seg.close()
    whole = positions[2]
    with open(tmp_path / "00000000000000000100.log", "r+b") as f:
        f.truncate(whole + cut)
    again = LogSegment(tmp_path, BASE, index_interval_bytes=0, max_index_size=4096, created_ms=0)
    with caplog.at_level(logging.WARNING):
        assert again.recover() == cut
    assert "invalid batch at position" in caplog.text
    assert again.size == whole == os.path.getsize(again.path)
    assert again.next_offset == BASE + 6
    again.close()


def test_recover_garbage_after_last_batch(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    append(seg, make_batch(2), make_batch(2))
    size = seg.size
    os.pwrite(seg.fd, b"\xff" * 300, size)
    seg.size += 300
    assert seg.recover() == 300
    assert seg.size == size
    assert seg.next_offset == BASE + 4
    seg.close()


def test_recover_bit_flip_in_the_middle(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    b = [make_batch(2, value_size=30) for _ in range(4)]
    positions = append(seg, *b)
    total = seg.size
    # flip one bit inside the records of the 2nd batch: its CRC fails
    flip_at = positions[1] + 70
    byte = os.pread(seg.fd, 1, flip_at)[0]
    os.pwrite(seg.fd, bytes([byte ^ 0x10]), flip_at)
    assert seg.recover() == total - positions[1]
    assert seg.size == positions[1]
    assert seg.next_offset == BASE + 2
    assert seg.offset_index.entries == 0
    assert [h.base_offset for _, h in iter_batches(seg.path.read_bytes())] == [BASE]
    seg.close()


def test_recover_stops_at_offsets_going_backwards(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    append(seg, make_batch(2))
    # a valid batch, but with a base offset already used
    stale = make_batch(1, base_offset=BASE)
    os.pwrite(seg.fd, stale, seg.size)
    seg.size += len(stale)
    assert seg.recover() == len(stale)
    assert seg.next_offset == BASE + 2
    seg.close()


def test_recover_of_an_empty_segment(seg: LogSegment) -> None:
    assert seg.recover() == 0
    assert seg.next_offset == BASE


# -- rolling -----------------------------------------------------------------------------


def roll(seg: LogSegment, incoming: int = 100, ts: int = T0, last: int | None = None,
         now: int = T0, seg_bytes: int = 10**6, seg_ms: int = 10**9) -> bool:  # fmt: skip
    last = seg.next_offset if last is None else last
    return seg.should_roll(incoming, ts, last, now, seg_bytes, seg_ms)


def test_empty_segment_does_not_roll_on_size_or_time(seg: LogSegment) -> None:
    assert not roll(seg, incoming=10**7, seg_bytes=100)
    assert not roll(seg, ts=T0 + 10**10, now=T0 + 10**10, seg_ms=1)


def test_roll_on_size(seg: LogSegment) -> None:
    batch = make_batch(1, value_size=100)
    append(seg, batch)
    size = seg.size
    assert not roll(seg, incoming=50, seg_bytes=size + 50)
    assert roll(seg, incoming=51, seg_bytes=size + 50)


def test_roll_on_time_uses_incoming_minus_first_batch_timestamp(seg: LogSegment) -> None:
    append(seg, make_batch(1, base_timestamp=T0 + 1000))
    append(seg, make_batch(1, base_timestamp=T0 + 5000))  # later batches do not matter
    assert seg.first_batch_timestamp == T0 + 1000
    # wall clock far ahead: replaying old data must not roll
    assert not roll(seg, ts=T0 + 1000 + 600, now=T0 + 10**9, seg_ms=600)
    assert roll(seg, ts=T0 + 1000 + 601, now=T0, seg_ms=600)


def test_roll_on_wall_clock_age_without_timestamps(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, created_ms=T0)
    append(seg, make_batch(1, base_timestamp=None))
    assert seg.first_batch_timestamp == NO_TIMESTAMP
    assert not roll(seg, ts=-1, now=T0 + 600, seg_ms=600)
    assert roll(seg, ts=-1, now=T0 + 601, seg_ms=600)
    seg.close()


def test_roll_when_offset_index_full(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, max_index_size=8 * 2 + 12 * 5)  # offset index: 9 entries
    seg.time_index.max_index_size = 12 * 100
    seg.time_index.make_appendable()
    for _ in range(9):
        assert not roll(seg)
        append(seg, make_batch(1))
    append(seg, make_batch(1))
    assert seg.offset_index.is_full
    assert roll(seg)
    seg.close()


def test_roll_when_time_index_full(tmp_path: Path) -> None:
    # 36 bytes: the offset index holds 4 entries, the time index only 3
    seg = open_segment(tmp_path, max_index_size=36)
    for i in range(4):
        assert not roll(seg)
        append(seg, make_batch(1, base_timestamp=T0 + i))
    assert seg.time_index.is_full and not seg.offset_index.is_full
    assert roll(seg)
    seg.close()
    assert seg.fd == -1


def test_full_indexes_stop_growing_instead_of_failing_an_append(tmp_path: Path) -> None:
    # Several batches in one append can fill an index between two roll checks.
    seg = open_segment(tmp_path, max_index_size=36)
    batches = [make_batch(1, base_timestamp=T0 + i) for i in range(8)]
    append(seg, *batches)
    assert seg.next_offset == BASE + 8
    assert seg.time_index.entries == 3 and seg.offset_index.entries == 3
    assert seg.max_timestamp == T0 + 7
    for i in range(8):
        assert seg.find_batch(BASE + i)[1].base_offset == BASE + i  # type: ignore[index]
    # closing with a full time index and a larger max timestamp must not fail either
    seg.close()
    assert seg.fd == -1


def test_roll_on_relative_offset_overflow(seg: LogSegment) -> None:
    append(seg, make_batch(1))
    assert not roll(seg, last=BASE + 2**31 - 1)
    assert roll(seg, last=BASE + 2**31)


def test_empty_segment_rolls_on_relative_offset_overflow(seg: LogSegment) -> None:
    # a follower's first batch far past the base offset does not fit the index
    assert roll(seg, last=BASE + 2**31)


# -- lifecycle ---------------------------------------------------------------------------


def test_close_for_append_trims_and_records_the_max_timestamp(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=10**6)
    append(seg, make_batch(3, base_timestamp=T0), make_batch(3, base_timestamp=T0 + 100))
    assert seg.time_index.entries == 0
    seg.close_for_append()
    assert seg.state is SegmentState.CLOSED
    assert list(seg.time_index) == [(T0 + 102, 5)]
    assert seg.offset_index.path.stat().st_size == 0
    assert seg.time_index.path.stat().st_size == 12
    seg.close()


def test_rename_for_delete_then_delete(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    append(seg, make_batch(2))
    part = seg.read(BASE, 1000)
    seg.rename_for_delete()
    assert seg.state is SegmentState.DELETED
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000100.index.deleted",
        "00000000000000000100.log.deleted",
        "00000000000000000100.timeindex.deleted",
    ]
    assert part is not None and validate_batch(part.read()).record_count == 2
    seg.delete()
    assert list(tmp_path.iterdir()) == []
    seg.delete()  # idempotent


def test_largest_timestamp(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    append(seg, make_batch(1, base_timestamp=None))
    os.utime(seg.path, (1234.5, 1234.5))
    assert seg.largest_timestamp == 1_234_500
    append(seg, make_batch(1, base_timestamp=0))
    # 0 is a real timestamp (Kafka: maxTimestampSoFar >= 0), not "none"
    assert seg.largest_timestamp == 0
    append(seg, make_batch(1, base_timestamp=T0))
    assert seg.largest_timestamp == T0
    seg.close()


def test_short_write_leaves_the_file_as_it_was(
    seg: LogSegment, monkeypatch: pytest.MonkeyPatch
) -> None:
    append(seg, make_batch(1))
    size = seg.size

    def short(fd: int, buffers: list[bytes], offset: int) -> int:
        os.pwrite(fd, buffers[0][:5], offset)
        return 5

    monkeypatch.setattr(os, "pwritev", short)
    with pytest.raises(OSError, match="short write"):
        append(seg, make_batch(1))
    assert seg.size == size == os.path.getsize(seg.path)
    assert seg.next_offset == BASE + 1
