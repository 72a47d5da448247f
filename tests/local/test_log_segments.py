"""tierlog.local.log_segments: one partition's segments in base-offset order (issue 21,
item 4: the loader, the swap and the log change it through these methods only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierlog.local.errors import CorruptSegmentError
from tierlog.local.log_segments import LogSegments
from tierlog.local.segment import BatchEntry, LogSegment

from .conftest import make_batch, with_offsets


def segment(directory: Path, base: int, batches: int = 0) -> LogSegment:
    seg = LogSegment(
        directory, base, index_interval_bytes=4096, max_index_size=1 << 16, created_ms=0
    )
    for n in range(batches):
        batch = with_offsets(make_batch(2), base + 2 * n)
        seg.append([batch], [BatchEntry(0, len(batch), base + 2 * n + 1, 0)])
    return seg


def test_lookups_by_offset(tmp_path: Path) -> None:
    segments = LogSegments(tmp_path, [segment(tmp_path, b) for b in (20, 0, 10)])
    assert segments.base_offsets == [0, 10, 20]
    assert [segments.floor(o).base_offset for o in (0, 9, 10, 25, -1)] == [0, 0, 10, 20, 0]
    assert [s.base_offset for s in segments.from_offset(12)] == [10, 20]
    assert segments.next_base(segments[0]) == 10 and segments.next_base(segments[2]) is None
    assert segments.active is segments[2] and segments.first is segments[0]
    assert segments[0] in segments and segment(tmp_path, 30) not in segments


def test_changes_keep_the_order_and_refuse_clashes(tmp_path: Path) -> None:
    segments = LogSegments(tmp_path, [segment(tmp_path, 0), segment(tmp_path, 20)])
    middle = segment(tmp_path, 10)
    segments.insert(middle)
    assert segments.base_offsets == [0, 10, 20] and segments.index(middle) == 1
    with pytest.raises(ValueError):
        segments.append(segment(tmp_path, 15))  # does not follow the last
    with pytest.raises(ValueError):
        segments.insert(segment(tmp_path, 10))  # a base taken
    segments.remove(middle)
    assert segments.base_offsets == [0, 20]
    with pytest.raises(ValueError):
        segments.index(middle)
    with pytest.raises(ValueError):
        LogSegments(tmp_path, [segment(tmp_path, 0), segment(tmp_path, 0)])


def test_the_batch_walk_passes_over_marked_damage_only(tmp_path: Path) -> None:
    first, second = segment(tmp_path, 0, batches=3), segment(tmp_path, 6, batches=2)
    segments = LogSegments(tmp_path, [first, second])
    assert [h.base_offset for _, _, h in segments.batches(2)] == [2, 4, 6, 8]
    size = first.size
    with open(first.path, "r+b") as f:  # the second batch's length: nothing after it
        f.seek(size // 3 + 8)
        f.write(b"\x7f\xff\x00\x00")
    with pytest.raises(CorruptSegmentError):
        list(segments.batches(0))
    first.mark_damaged(size // 3, size, "damaged")
    assert [h.base_offset for _, _, h in segments.batches(0)] == [0, 6, 8]
